import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hashToken, newToken } from '@relayplane/contract/tokens';
import { afterEach, describe, expect, it } from 'vitest';
import { audit, type Minimums, passwordLiterals, report, scanText, testPasswords } from './secrets-audit.ts';

const NONE: Minimums = { logs: 0, processes: 0, db: 0, redis: 0 };
const PASSWORDS = ['a long enough password'];
const API_KEY = `svc_live_${'0123456789abcdef'.repeat(4)}`;
const SIGNED_JWT =
  'eyJhbGciOiJFZERTQSIsImtpZCI6ImsxIn0.eyJzdWIiOiJib3RfMTIzIiwianRpIjoiY3JfMSJ9.c2lnbmF0dXJlLW9mLXRoZS1jcmVkZW50aWFsLWJ5dGVz';

function kinds(text: string): string[] {
  return scanText('f', text, passwordLiterals(PASSWORDS)).map((f) => f.kind);
}

describe('the scanner', () => {
  it('finds every kind of token parseToken accepts, and never prints it whole', () => {
    for (const kind of ['userSession', 'identity', 'bot', 'cli', 'relayNode'] as const) {
      const token = newToken(kind);
      const [finding, ...rest] = scanText('log', `{"msg":"issued","value":"${token}"}`, []);
      expect(rest).toEqual([]);
      expect(finding?.kind).toBe('token');
      expect(finding?.excerpt).not.toContain(token);
      expect(finding?.excerpt).toContain(`<token: ${token.slice(0, 4)}… 76 chars>`);
    }
  });

  it('ignores a SHA-256 (64 hex, no prefix) and a token whose checksum does not hold', () => {
    const token = newToken('bot');
    const badChecksum = `${token.slice(0, -1)}${token.endsWith('0') ? '1' : '0'}`;
    expect(kinds(`{"token_hash":"${hashToken(token)}","other":"${badChecksum}"}`)).toEqual([]);
  });

  it('finds API keys, signed JWTs, user codes, private keys and the test passwords', () => {
    expect(kinds(`key ${API_KEY} shown`)).toEqual(['api key']);
    expect(kinds(`Bearer ${SIGNED_JWT}`)).toEqual(['jwt']);
    expect(kinds('{"msg":"code BCDF-GHJK started"}')).toEqual(['user code']);
    expect(kinds('-----BEGIN PRIVATE KEY-----')).toEqual(['private key']);
    expect(kinds(`{"kty":"OKP","d":"${'A'.repeat(43)}"}`)).toEqual(['private key (JWK "d")']);
    expect(kinds('login with a long enough password failed')).toEqual(['test password']);
  });

  it('does not count a signed audit checkpoint (a public JWS) as a credential, but still a JWT of any other type', () => {
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const sig = 'A'.repeat(86);
    const checkpoint = `${b64({ alg: 'EdDSA', typ: 'relayplane-audit-checkpoint+jws', kid: 'k' })}.${b64({ seq: 1, hash: 'h', tenant_id: 't', at: 'x' })}.${sig}`;
    const credential = `${b64({ alg: 'EdDSA', typ: 'JWT', kid: 'k' })}.${b64({ sub: 'someone', tid: 't' })}.${sig}`;
    expect(kinds(`{"jws":"${checkpoint}"}`)).toEqual([]);
    expect(kinds(`{"jws":"${credential}"}`)).toEqual(['jwt']);
  });

  it('finds a credential-named field unless it is redacted or empty, also in JSON inside a string', () => {
    expect(kinds('{"device_code":"GmRhmhcxhwAzkoEqiMEg_DnyEysNkuNhszIySk9eS","level":30}')).toEqual([
      'credential field',
    ]);
    expect(kinds('{"row":"{\\"password\\":\\"hunter22\\"}"}')).toEqual(['credential field']);
    expect(kinds('{"password":"[redacted]","token":"","deviceCodeHash":"abc"}')).toEqual([]);
    expect(kinds(`-d '{"password":"<password>"}' | sed -E 's/.*"token":"([^"]+)".*/\\1/'`)).toEqual([]);
  });

  it('ignores a user-code shape inside a longer base64url run, and the XXXX-XXXX placeholder', () => {
    expect(kinds('{"kid":"xBCDF-GHJKy","n":"AA-BCDF-GHJK_Z"}')).toEqual([]);
    expect(kinds('✓ starts a grant: XXXX-XXXX user code, 600 s')).toEqual([]);
  });

  it('reads the passwords the test sources use, leaving out phrases application code uses', () => {
    const passwords = testPasswords(join(import.meta.dirname, '..', '..', '..'));
    expect(passwords).toContain('a long enough password');
    expect(passwords).not.toContain('wrong password');
    expect(passwords.every((p) => p.length >= 8)).toBe(true);
  });
});

describe('the audit of a run directory', () => {
  let dir: string;
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  function run(files: Record<string, string>, min: Minimums = NONE) {
    dir = mkdtempSync(join(tmpdir(), 'secrets-audit-test-'));
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(join(dir, path, '..'), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const lines: string[] = [];
    const ok = report(audit(dir, PASSWORDS, min), (l) => lines.push(l));
    return { ok, lines };
  }

  it('passes clean logs and dumps, and says what it scanned', () => {
    const { ok, lines } = run({
      'logs/admin-1-aaaaaa.log': '{"level":30,"msg":"bot key created","keyId":"key_1"}\n',
      'db/rp_x_1234abcd-1-bbbbbb.created': 'x\n',
      'db/rp_x_1234abcd-1-cccccc.jsonl': `{"table":"admin.sessions","row":{"token_hash":"${hashToken(newToken('userSession'))}"}}\n`,
    });
    expect(ok).toBe(true);
    expect(lines.at(-1)).toMatch(
      /^secrets audit: 2 files \(1 db, 1 logs\), \d+ bytes scanned, 0 secrets from API traffic looked for, 0 findings$/,
    );
  });

  it('fails on a token planted in a log file, naming the file and line', () => {
    const token = newToken('cli');
    const { ok, lines } = run({
      'logs/admin-1-aaaaaa.log': `{"level":30}\n{"level":30,"msg":"issued ${token}"}\n`,
    });
    expect(ok).toBe(false);
    expect(lines[0]).toMatch(/^logs\/admin-1-aaaaaa\.log:2: token: /);
    expect(lines.join('\n')).not.toContain(token);
  });

  it('fails on an API key and a password planted in a database dump', () => {
    const { ok, lines } = run({
      'db/rp_x_1234abcd-1-bbbbbb.created': 'x\n',
      'db/rp_x_1234abcd-1-cccccc.jsonl': `{"table":"admin.api_keys","row":{"key":"${API_KEY}","note":"a long enough password"}}\n`,
    });
    expect(ok).toBe(false);
    expect(lines.filter((l) => l.startsWith('db/')).map((l) => l.split(': ')[1])).toEqual([
      'api key',
      'test password',
    ]);
  });

  it('finds, verbatim, a secret a test saw in API traffic (a device code has no shape to match)', () => {
    const deviceCode = 'GmRhmhcxhwAzkoEqiMEg_DnyEysNkuNhszIySk9eSxQ';
    const { ok, lines } = run({
      'known-secrets/seen-1-aaaaaa.jsonl': `${JSON.stringify({ field: 'device_code', value: deviceCode })}\n`,
      'processes/gateway-1-bbbbbb.log': `{"level":30,"msg":"polled","req":{"url":"/token?c=${deviceCode}"}}\n`,
      'processes/admin-1-cccccc.log': '{"level":30,"msg":"clean"}\n',
    });
    expect(ok).toBe(false);
    expect(lines[0]).toMatch(
      /^processes\/gateway-1-bbbbbb\.log:1: secret seen in API traffic \(device_code\): /,
    );
    expect(lines.at(-1)).toMatch(
      /2 files \(2 processes\), \d+ bytes scanned, 1 secrets from API traffic looked for, 1 findings$/,
    );
  });

  it('fails when the directory is missing, too thin, or a database was never dumped', () => {
    dir = join(tmpdir(), 'secrets-audit-test-missing');
    rmSync(dir, { recursive: true, force: true });
    expect(report(audit(dir, PASSWORDS, NONE), () => {})).toBe(false);

    const thin = run({ 'logs/a-1-aaaaaa.log': '{}\n' }, { ...NONE, logs: 2, db: 1 });
    expect(thin.ok).toBe(false);
    expect(thin.lines.filter((l) => l.startsWith('audit incomplete'))).toHaveLength(2);

    const undumped = run({ 'db/rp_y_00000000-1-aaaaaa.created': 'y\n' });
    expect(undumped.ok).toBe(false);
    expect(undumped.lines.join('\n')).toContain('never dumped (their drop() never ran): rp_y_00000000');
  });
});
