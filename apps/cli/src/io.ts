/** Everything the CLI touches outside itself, so tests can run it in-process. */
import type { FetchLike } from './http.ts';

export interface OutStream {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface Io {
  env: Readonly<Record<string, string | undefined>>;
  stdout: OutStream;
  stderr: OutStream;
  fetch: FetchLike;
  sleep(ms: number): Promise<void>;
  now(): number;
  /** Where the saved login lives. */
  configPath: string;
  readStdin(): Promise<string>;
}
