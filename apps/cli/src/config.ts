/**
 * The saved login: `<config dir>/config.json`, mode 0600 in a 0700 directory, replaced
 * atomically (temp file + rename) so a crash never leaves half a token behind.
 */
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import envPaths from 'env-paths';
import { CliError, EXIT } from './errors.ts';

export interface SavedConfig {
  api_url?: string;
  token?: string;
  token_expires_at?: string;
  email?: string;
  tenant?: string;
  saved_at?: string;
}

/** `$XDG_CONFIG_HOME/relayplane/config.json` on Linux (env-paths decides per platform). */
export function defaultConfigPath(): string {
  return join(envPaths('relayplane', { suffix: '' }).config, 'config.json');
}

export class ConfigStore {
  readonly path: string;

  constructor(path: string) {
    this.path = path;
  }

  /** The saved config; empty when there is none. A file others may read is reported, not trusted less. */
  read(warn: (message: string) => void = () => {}): SavedConfig {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw new CliError(EXIT.api, `cannot read ${this.path}: ${(err as Error).message}`);
    }
    if (process.platform !== 'win32' && (statSync(this.path).mode & 0o077) !== 0) {
      warn(`${this.path} is readable by other users; fix it with: chmod 600 ${this.path}`);
    }
    try {
      const parsed: unknown = JSON.parse(text);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
        throw new Error('not an object');
      return parsed as SavedConfig;
    } catch {
      throw new CliError(
        EXIT.api,
        `${this.path} is not valid JSON`,
        'run `relayplane login` again (or delete the file)',
      );
    }
  }

  write(config: SavedConfig): void {
    const dir = dirname(this.path);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (process.platform !== 'win32') chmodSync(dir, 0o700);
    const tmp = `${this.path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    const fd = openSync(tmp, 'wx', 0o600);
    try {
      writeSync(fd, `${JSON.stringify(config, null, 2)}\n`);
      fsyncSync(fd);
    } catch (err) {
      closeSync(fd);
      rmSync(tmp, { force: true });
      throw err;
    }
    closeSync(fd);
    try {
      renameSync(tmp, this.path);
    } catch (err) {
      rmSync(tmp, { force: true });
      throw err;
    }
  }

  /** Forgets the token (and who it belonged to) but keeps the API URL. */
  clearToken(): void {
    const { token: _token, token_expires_at: _exp, email: _email, tenant: _tenant, ...rest } = this.read();
    this.write(rest);
  }
}
