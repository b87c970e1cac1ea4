import { describe, expect, it } from 'vitest';
import type { Bot, BotSession, IdentityToken, UserSession } from './api-types.ts';
import { describeSession } from './commands/auth.ts';

const bot: Bot = {
  id: 'bot_1',
  project_id: 'prj_1',
  name: 'ci',
  role: 'developer',
  created_at: '2026-11-23T00:00:00Z',
};
const machine: Omit<BotSession, 'authenticated_by'> = {
  tenant_id: 'ten_1',
  project_id: 'prj_1',
  role: 'developer',
  permissions: ['projects:read'],
  bot,
};

const identityToken: IdentityToken = {
  id: 'idt_1',
  identity_id: 'bot_1',
  project_id: 'prj_1',
  scopes: ['projects:read'],
  display_prefix: 'rpi_1a2b',
  last_four: 'wxyz',
  created_at: '2026-11-23T00:00:00Z',
  expires_at: '2026-11-23T01:00:00Z',
  last_used_at: null,
  revoked_at: null,
};

describe('describeSession', () => {
  it('names the user of a user session or CLI token', () => {
    const user: UserSession = {
      id: 'ses_1',
      user: { id: 'usr_1', email: 'me@example.com', platform_admin: false, created_at: '' },
      tenant: { id: 'ten_1', name: 'acme', created_at: '' },
      role: 'owner',
      created_at: '',
      expires_at: '',
      kind: 'session',
      permissions: ['projects:read'],
      authenticated_by: 'bearer',
    };
    expect(describeSession(user)).toBe('Logged in as me@example.com (tenant acme, role owner)');
  });

  it('names the bot of a bot token, and the token and bot of an identity token', () => {
    expect(describeSession({ authenticated_by: 'bot_token', ...machine })).toBe(
      'Authenticated as bot ci (project prj_1, role developer)',
    );
    expect(
      describeSession({
        authenticated_by: 'identity_token',
        ...machine,
        identity_token: identityToken,
      }),
    ).toBe('Authenticated as identity token idt_1 of bot ci (project prj_1, role developer)');
  });
});
