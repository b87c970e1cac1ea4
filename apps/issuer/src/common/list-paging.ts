/**
 * Paging of the issuer's operator lists (relays, signing keys): `limit` 1..200 (0: 50) and an
 * opaque cursor, base64url JSON of where the previous page ended. The same words as
 * ListCredentials for the same mistakes. Pure.
 */
import { AppError } from '@relayplane/contract/errors';

export const LIST_LIMIT = { default: 50, max: 200 } as const;

export const CURSOR_MESSAGE = 'cursor is not one this API returned';

/** The page size a request asks for: 0 is the default; outside 0..200 is `invalid_request`. */
export function pageLimit(limit: number): number {
  if (!Number.isInteger(limit) || limit < 0 || limit > LIST_LIMIT.max) {
    throw new AppError('invalid_request', `limit must be between 1 and ${LIST_LIMIT.max}`);
  }
  return limit || LIST_LIMIT.default;
}

export function encodeCursor(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/**
 * The JSON a cursor holds, checked by `accept` (which answers the decoded position, or
 * undefined for anything this API would not have written). Otherwise `invalid_request`.
 */
export function decodeCursor<T>(cursor: string, accept: (value: unknown) => T | undefined): T {
  if (cursor.length <= 512 && /^[A-Za-z0-9_-]+$/.test(cursor)) {
    try {
      const accepted = accept(JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')));
      if (accepted !== undefined) return accepted;
    } catch {
      // answered below
    }
  }
  throw new AppError('invalid_request', CURSOR_MESSAGE);
}

/** A millisecond instant a Date can hold, from a cursor. */
export function instantOf(value: unknown): Date | undefined {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) return undefined;
  const date = new Date(value);
  return Number.isFinite(date.getTime()) ? date : undefined;
}
