/** Bots (machine identities of a project): roles, names, token display. Pure. */
import {
  BOT_ROLE_NAMES,
  type BotRoleName,
  DEFAULT_BOT_ROLE,
  isBotRoleName,
  type RoleName,
} from '@relayplane/contract/contract';
import { type Checked, fail, ok } from './validation.ts';

const BOT_NAME_MAX_LENGTH = 64;
/** `rpb_` + 4 hex: enough to tell tokens apart, far too little to guess one. */
export const BOT_KEY_DISPLAY_PREFIX_LENGTH = 8;

/** A bot's role is project-scoped and never more than developer; unspecified means the default. */
export function checkBotRole(role: RoleName | undefined): Checked<BotRoleName> {
  if (role === undefined) return ok(DEFAULT_BOT_ROLE);
  if (isBotRoleName(role)) return ok(role);
  return fail(`role must be one of ${BOT_ROLE_NAMES.join(', ')}`);
}

const UNPRINTABLE = /\p{C}/u;

/** Trimmed, 1 to 64 printable characters. */
export function checkBotName(raw: string): Checked<string> {
  const name = raw.trim();
  if (name === '') return fail('name is required');
  if ([...name].length > BOT_NAME_MAX_LENGTH)
    return fail(`name must be at most ${BOT_NAME_MAX_LENGTH} characters`);
  if (UNPRINTABLE.test(name)) return fail('name must contain only printable characters');
  return ok(name);
}
