/** Bots (machine identities of a project): roles, names, token display. Pure. */
import type { Role } from './roles.ts';
import type { Checked } from './validation.ts';

const ok = <T>(value: T): Checked<T> => ({ ok: true, value });
const fail = <T>(message: string): Checked<T> => ({ ok: false, message });

/** A bot's role is project-scoped and never more than developer. */
export const BOT_ROLES = ['developer', 'viewer'] as const satisfies readonly Role[];
export type BotRole = (typeof BOT_ROLES)[number];
export const DEFAULT_BOT_ROLE: BotRole = 'developer';

export const BOT_NAME_MAX_LENGTH = 64;
/** `rpb_` + 4 hex: enough to tell tokens apart, far too little to guess one. */
export const BOT_KEY_DISPLAY_PREFIX_LENGTH = 8;

export function isBotRole(value: string): value is BotRole {
  return (BOT_ROLES as readonly string[]).includes(value);
}

/** Undefined (unspecified) means developer. */
export function checkBotRole(role: Role | undefined): Checked<BotRole> {
  if (role === undefined) return ok(DEFAULT_BOT_ROLE);
  if (isBotRole(role)) return ok(role);
  return fail(`role must be one of ${BOT_ROLES.join(', ')}`);
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
