import { describe, expect, it } from 'vitest';
import { addressProblem, checkTarget, type Resolve, urlProblem } from './webhook-target.ts';

const STRICT = { allowLoopback: false };
const LOCAL = { allowLoopback: true };
const resolving =
  (table: Record<string, string[]>): Resolve =>
  async (host) => {
    const addresses = table[host];
    if (!addresses) throw new Error('ENOTFOUND');
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };

describe('webhook targets (SSRF safety)', () => {
  it('takes https URLs only, http to loopback where the operator allows it', () => {
    expect(urlProblem('https://hooks.example.com/in', STRICT)).toBeUndefined();
    expect(urlProblem('http://hooks.example.com/in', STRICT)).toBe('url must be https://');
    expect(urlProblem('http://127.0.0.1:9000/in', LOCAL)).toBeUndefined();
    expect(urlProblem('ftp://x.example', LOCAL)).toMatch(/https/);
    expect(urlProblem('https://user:pw@hooks.example.com', STRICT)).toBe('url must not carry credentials');
    expect(urlProblem('not a url', STRICT)).toBe('url must be an absolute URL');
  });

  it('refuses private, loopback, link-local, reserved and mapped addresses', () => {
    for (const address of [
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '127.0.0.1',
      '::1',
      '::',
      'fd00::1',
      'fe80::1',
      '::ffff:10.0.0.1',
      '::ffff:127.0.0.1',
      '224.0.0.1',
    ])
      expect(addressProblem(address, STRICT), address).toBeDefined();
    for (const address of ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946', '::ffff:93.184.216.34'])
      expect(addressProblem(address, STRICT), address).toBeUndefined();
    expect(addressProblem('127.0.0.1', LOCAL)).toBeUndefined();
    expect(addressProblem('10.0.0.1', LOCAL)).toBeDefined();
  });

  it('checks every address a name resolves to, at send time', async () => {
    const dns = resolving({
      'hooks.example.com': ['93.184.216.34'],
      'mixed.example.com': ['93.184.216.34', '10.0.0.7'],
      'metadata.example.com': ['169.254.169.254'],
      localhost: ['127.0.0.1'],
    });
    expect(await checkTarget('https://hooks.example.com/in', STRICT, dns)).toMatchObject({
      ok: true,
      addresses: ['93.184.216.34'],
    });
    expect(await checkTarget('https://mixed.example.com/in', STRICT, dns)).toMatchObject({
      ok: false,
      reason: /10\.0\.0\.7 is a private/,
    });
    expect(await checkTarget('https://metadata.example.com/', STRICT, dns)).toMatchObject({ ok: false });
    expect(await checkTarget('https://[::1]:8443/', STRICT, dns)).toMatchObject({
      ok: false,
      reason: /loopback/,
    });
    expect(await checkTarget('https://nowhere.example/', STRICT, dns)).toMatchObject({
      ok: false,
      reason: /does not resolve/,
    });
    expect(await checkTarget('http://localhost:9000/in', LOCAL, dns)).toMatchObject({ ok: true });
    expect(await checkTarget('http://hooks.example.com/in', LOCAL, dns)).toMatchObject({
      ok: false,
      reason: /only for loopback/,
    });
  });
});
