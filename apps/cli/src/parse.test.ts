import { describe, expect, it } from 'vitest';
import { COMMANDS } from './cli.ts';
import { EXIT, UsageError } from './errors.ts';
import { commandWords, idArg, intValue, resolve } from './parse.ts';

function command(argv: string[]) {
  const r = resolve(argv, COMMANDS);
  if (r.kind !== 'command') throw new Error(`expected a command, got help for ${r.path.join(' ')}`);
  return r;
}

function usageError(argv: string[]): UsageError {
  try {
    resolve(argv, COMMANDS);
  } catch (err) {
    if (err instanceof UsageError) return err;
    throw err;
  }
  throw new Error(`no usage error for ${argv.join(' ')}`);
}

describe('argument parsing', () => {
  it('finds nested command words even with global flags and their values between them', () => {
    const r = command([
      '--api-url',
      'http://x:1',
      'api-keys',
      '--json',
      'create',
      'prj_1',
      '--scope',
      'a',
      '--scope',
      'b',
    ]);
    expect(r.command.path).toEqual(['api-keys', 'create']);
    expect(r.parsed.positionals).toEqual(['prj_1']);
    expect(r.parsed.values['api-url']).toBe('http://x:1');
    expect(r.parsed.values.json).toBe(true);
    expect(r.parsed.values.scope).toEqual(['a', 'b']);
  });

  it('tells a list command from its subcommands by the word after the group', () => {
    expect(command(['api-keys', 'prj_1']).command.path).toEqual(['api-keys']);
    expect(command(['bots', 'keys', 'create', 'prj_1', 'bot_1']).command.path).toEqual([
      'bots',
      'keys',
      'create',
    ]);
    expect(command(['keys']).command.path).toEqual(['keys']);
    expect(command(['keys', 'rotate']).command.path).toEqual(['keys', 'rotate']);
    expect(command(['projects', 'list']).command.path).toEqual(['projects', 'list']);
  });

  it('does not take an option value for a command word', () => {
    expect(commandWords(['projects', 'create', '--environment', 'create', 'x'], COMMANDS)).toEqual({
      words: ['projects', 'create'],
      next: 'x',
    });
    expect(command(['--api-url', 'projects', 'projects']).parsed.values['api-url']).toBe('projects');
  });

  it('rejects an unknown flag as a usage error (exit 2) naming the flag and the command', () => {
    const err = usageError(['projects', 'create', 'demo', '--colour']);
    expect(err.exitCode).toBe(EXIT.usage);
    expect(err.message).toBe('unknown option --colour');
    expect(err.command).toEqual(['projects', 'create']);
  });

  it('rejects missing and surplus arguments', () => {
    expect(usageError(['api-keys', 'revoke', 'prj_1']).message).toBe('missing argument <key_id>');
    expect(usageError(['bots', 'create']).message).toBe('missing arguments <project_id> <name>');
    expect(usageError(['projects', 'extra']).message).toBe('unexpected argument "extra"');
  });

  it('checks enumerated flags before calling the API', () => {
    expect(usageError(['projects', 'create', 'x', '--environment', 'prod']).message).toContain(
      'production, staging, development',
    );
    expect(usageError(['api-keys', 'create', 'prj_1', '--mode', 'dev']).message).toContain('live, test');
    expect(usageError(['bots', 'create', 'p', 'b', '--role', 'owner']).message).toContain(
      'developer, viewer',
    );
  });

  it('refuses an API key given as an argument, saying why', () => {
    expect(usageError(['credentials', 'issue', `svc_live_${'0'.repeat(64)}`]).message).toContain(
      'not accepted as an argument',
    );
  });

  it('answers help for --help or -h anywhere before --, even next to an unknown flag', () => {
    const r = resolve(['credentials', 'issue', '--nope', '-h'], COMMANDS);
    expect(r.kind === 'command' && r.help).toBe(true);
    const group = resolve(['bots', 'keys', '--help'], COMMANDS);
    expect(group).toMatchObject({ kind: 'help', path: ['bots', 'keys'] });
    const literal = command(['projects', 'create', '--', '--help']);
    expect(literal.help).toBe(false);
    expect(literal.parsed.positionals).toEqual(['--help']);
  });

  it('reports unknown commands and groups without a subcommand', () => {
    expect(usageError(['deploy']).message).toBe('unknown command "deploy"');
    expect(usageError(['credentials']).message).toBe('"credentials" needs a subcommand');
    expect(usageError(['bots', 'keys', 'prj_1']).message).toBe('unknown command "bots keys prj_1"');
    expect(usageError([]).message).toBe('no command given');
  });

  it('parses whole numbers only and refuses ids that would change the URL path', () => {
    expect(intValue({ ttl: '300' }, 'ttl', [])).toBe(300);
    expect(() => intValue({ ttl: '1e3' }, 'ttl', [])).toThrow(UsageError);
    expect(() => intValue({ ttl: '-5' }, 'ttl', [])).toThrow(UsageError);
    expect(idArg('prj_1', 'project_id', [])).toBe('prj_1');
    expect(() => idArg('..', 'project_id', [])).toThrow(UsageError);
  });
});
