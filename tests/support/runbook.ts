/**
 * Runs the shell blocks of an operator runbook (a Markdown section) as written, so a test of
 * the procedure and the document the operator follows cannot drift apart.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { auditChildOutput } from '@relayplane/testing/audit';

/** The ```sh blocks of the `## <heading>` section (up to the next `## ` heading) of a Markdown file. */
export function shellBlocks(markdownPath: string, heading: string): string[] {
  const lines = readFileSync(markdownPath, 'utf8').split('\n');
  const start = lines.indexOf(`## ${heading}`);
  if (start === -1) throw new Error(`${markdownPath} has no "## ${heading}" section`);
  const end = lines.findIndex((line, i) => i > start && line.startsWith('## '));
  const section = lines.slice(start, end === -1 ? undefined : end).join('\n');
  // Blocks may be indented under a list item; the shell does not mind the indentation.
  return [...section.matchAll(/^[ \t]*```sh\n([\s\S]*?)^[ \t]*```$/gm)].map((m) => m[1] ?? '');
}

/**
 * Runs `script` with bash (`-euo pipefail`), with only PATH, HOME and `env` in its environment;
 * SIGKILL after `timeoutMs`. Resolves with the exit code (null when killed) and the output.
 */
export function runShell(
  script: string,
  env: Record<string, string>,
  timeoutMs: number,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', script], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    auditChildOutput(child, 'runbook');
    let output = '';
    const collect = (chunk: Buffer) => {
      output += chunk.toString();
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}
