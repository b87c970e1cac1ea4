import { describe, expect, it } from 'vitest';
import { checkBotName, checkBotRole } from './bots.ts';

describe('bots', () => {
  it('defaults a bot to developer and allows only developer or viewer', () => {
    expect(checkBotRole(undefined)).toEqual({ ok: true, value: 'developer' });
    expect(checkBotRole('viewer')).toEqual({ ok: true, value: 'viewer' });
    expect(checkBotRole('owner')).toEqual({ ok: false, message: 'role must be one of developer, viewer' });
    expect(checkBotRole('admin')).toMatchObject({ ok: false });
  });

  it('trims names and refuses empty, overlong and unprintable ones', () => {
    expect(checkBotName('  ci  ')).toEqual({ ok: true, value: 'ci' });
    expect(checkBotName('   ')).toEqual({ ok: false, message: 'name is required' });
    expect(checkBotName('x'.repeat(65))).toMatchObject({ ok: false });
    expect(checkBotName('x'.repeat(64))).toMatchObject({ ok: true });
    expect(checkBotName('a\u0000b')).toMatchObject({ ok: false });
  });
});
