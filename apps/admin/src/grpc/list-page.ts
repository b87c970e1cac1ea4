/**
 * The paging every admin list takes (docs/iam.md, "Lists and paging"): `limit` 1..200 (0: the
 * default, 50) and an opaque `cursor`, answered with `next_cursor` (empty on the last page) —
 * the same rules and messages as ListAuditEvents. The cursor is the position of the last item
 * answered (stores/paging.ts), base64url JSON; it is not signed: a forged one only moves where
 * the caller's own list starts.
 */
import { AUDIT_LIST_LIMIT } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import type { Page, PageRequest, Position } from '../stores/paging.ts';

/** The page size's default and maximum, as for the audit trail. */
export const LIST_LIMIT = AUDIT_LIST_LIMIT;

export const LIMIT_MESSAGE = `limit must be between 1 and ${LIST_LIMIT.max}`;
export const CURSOR_MESSAGE = 'cursor is not a cursor this endpoint answered';

/** `created_at` to the microsecond, UTC, as PostgreSQL's to_char writes it in stores/paging.ts. */
const AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
/** Ids, and an allowlist entry's normalised CIDR. */
const KEY = /^[0-9A-Za-z_.:/-]{1,128}$/;
const MAX_CURSOR_LENGTH = 512;

/** The shape, and a real date and time (2026-02-31 would fail in PostgreSQL). */
function isInstant(t: string): boolean {
  if (!AT.test(t)) return false;
  const ms = Date.parse(`${t.slice(0, 23)}Z`);
  return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 23) === t.slice(0, 23);
}

export function encodeCursor(position: Position): string {
  return Buffer.from(JSON.stringify({ t: position.at, k: position.key })).toString('base64url');
}

function decodeCursor(cursor: string): Position {
  if (cursor.length <= MAX_CURSOR_LENGTH) {
    try {
      const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as {
        t?: unknown;
        k?: unknown;
      };
      const { t, k } = parsed;
      if (typeof t === 'string' && isInstant(t) && typeof k === 'string' && KEY.test(k))
        return { at: t, key: k };
    } catch {
      // answered below
    }
  }
  throw new AppError('invalid_request', CURSOR_MESSAGE);
}

/** The page a list request asks for, or invalid_request naming what is wrong. */
export function pageRequest(req: { limit: number; cursor: string }): PageRequest {
  const limit = req.limit === 0 ? LIST_LIMIT.default : req.limit;
  if (limit > LIST_LIMIT.max) throw new AppError('invalid_request', LIMIT_MESSAGE);
  return { limit, after: req.cursor === '' ? undefined : decodeCursor(req.cursor) };
}

/** The response's `next_cursor`: empty on the last page. */
export function nextCursor(page: Page<unknown>): string {
  return page.next ? encodeCursor(page.next) : '';
}
