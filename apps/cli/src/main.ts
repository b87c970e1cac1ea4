/** Process entry only: real stdio, fetch, clock and config path; the exit code from run(). */
import { run } from './cli.ts';
import { defaultConfigPath } from './config.ts';

async function readStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return text;
}

process.exitCode = await run(process.argv.slice(2), {
  env: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
  fetch: (input, init) => fetch(input, init),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  now: () => Date.now(),
  configPath: defaultConfigPath(),
  readStdin,
});
