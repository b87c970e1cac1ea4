/** The baseline: a Fastify hello-world on the same machine, measured in the same run. */
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.get('/', async () => ({ hello: 'world' }));
const address = await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });
process.stdout.write(`listening ${address}\n`);
process.once('SIGTERM', () => app.close().then(() => process.exit(0)));
