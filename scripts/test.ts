/**
 * `pnpm test`: every package's tests through turbo, then the secrets audit over what they
 * logged and stored. The run's audit directory (RELAYPLANE_TEST_AUDIT_DIR, default
 * .test-audit/, emptied first) receives test loggers, child processes, database and Redis
 * dumps, and this run's own output. Arguments go to turbo (`pnpm test --filter=@relayplane/admin`);
 * a filtered run does not have to reach the whole run's minimum of captured files.
 */
import { spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { runAudit } from './secrets-audit.ts';

const root = join(import.meta.dirname, '..');
const args = process.argv.slice(2);
let dir = process.env.RELAYPLANE_TEST_AUDIT_DIR;
if (!dir) {
  dir = join(root, '.test-audit');
  rmSync(dir, { recursive: true, force: true });
}
mkdirSync(join(dir, 'run'), { recursive: true });

const output = createWriteStream(join(dir, 'run', 'turbo.log'));
const turbo = spawn(
  join(root, 'node_modules', '.bin', 'turbo'),
  ['run', 'test', '--concurrency=1', '--continue', ...args],
  { cwd: root, env: { ...process.env, RELAYPLANE_TEST_AUDIT_DIR: dir }, stdio: ['inherit', 'pipe', 'pipe'] },
);
turbo.stdout.on('data', (chunk: Buffer) => {
  process.stdout.write(chunk);
  output.write(chunk);
});
turbo.stderr.on('data', (chunk: Buffer) => {
  process.stderr.write(chunk);
  output.write(chunk);
});
const code = await new Promise<number>((resolve) => turbo.once('close', (c) => resolve(c ?? 1)));
await new Promise<void>((resolve) => output.end(resolve));

console.log(`\n==> secrets audit of ${dir}`);
const partial = args.length > 0 ? ['--min-logs=0', '--min-processes=0', '--min-db=0', '--min-redis=0'] : [];
const audited = runAudit([dir, ...partial]);
process.exit(code !== 0 ? code : audited);
