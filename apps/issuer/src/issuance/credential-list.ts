/** ListCredentials: a project's credentials, newest first, in pages with an opaque cursor. */

import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import type { Clock } from '@relayplane/shared/clock';
import { isJti } from '../keys/jwt.ts';
import type { CredentialListing, CredentialStore } from './credential-store.ts';

const DEFAULT_CREDENTIALS_LIMIT = 50;
const MAX_CREDENTIALS_LIMIT = 200;

export interface CredentialPage {
  credentials: CredentialListing[];
  /** Empty on the last page. */
  nextCursor: string;
}

export class CredentialList {
  readonly #d: { store: CredentialStore; clock: Clock };

  constructor(deps: { store: CredentialStore; clock: Clock }) {
    this.#d = deps;
  }

  /**
   * ListCredentials: a project's credentials, newest first, `limit` (1..200, 0: 50) per page;
   * `cursor` is the opaque `nextCursor` of the previous page.
   */
  async list(input: {
    tenantId: string;
    projectId: string;
    apiKeyId: string;
    active: boolean;
    limit: number;
    cursor: string;
  }): Promise<CredentialPage> {
    if (!isId('tenant', input.tenantId))
      throw new AppError('invalid_request', 'tenant_id must be a tenant id (ten_…)');
    if (!isId('project', input.projectId))
      throw new AppError('invalid_request', 'project_id must be a project id (prj_…)');
    // Checked before PostgreSQL sees it: a NUL byte there is an error of its own (22021).
    if (input.apiKeyId && !isId('apiKey', input.apiKeyId))
      throw new AppError('invalid_request', 'api_key_id must be an API key id (key_…)');
    if (!Number.isInteger(input.limit) || input.limit < 0 || input.limit > MAX_CREDENTIALS_LIMIT) {
      throw new AppError('invalid_request', `limit must be between 1 and ${MAX_CREDENTIALS_LIMIT}`);
    }
    const limit = input.limit || DEFAULT_CREDENTIALS_LIMIT;
    const after = input.cursor ? decodeListCursor(input.cursor) : undefined;
    const credentials = await this.#d.store.list(
      {
        tenantId: input.tenantId,
        projectId: input.projectId,
        apiKeyId: input.apiKeyId || undefined,
        active: input.active,
        limit: limit + 1,
        after,
      },
      this.#d.clock.now(),
    );
    const more = credentials.length > limit;
    const page = more ? credentials.slice(0, limit) : credentials;
    const last = page.at(-1);
    return { credentials: page, nextCursor: more && last ? encodeListCursor(last) : '' };
  }
}

/** The opaque ListCredentials cursor: base64url of the last row's issued_at (ms) and jti. */
function encodeListCursor(last: CredentialListing): string {
  return Buffer.from(JSON.stringify([last.issuedAt.getTime(), last.jti])).toString('base64url');
}

function decodeListCursor(cursor: string): { issuedAt: Date; jti: string } {
  try {
    const [ms, jti] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    if (typeof ms === 'number' && Number.isSafeInteger(ms) && typeof jti === 'string' && isJti(jti)) {
      const issuedAt = new Date(ms);
      // A safe integer can still be past the last instant a Date holds (±8.64e15 ms).
      if (Number.isFinite(issuedAt.getTime())) return { issuedAt, jti };
    }
  } catch {
    // fall through
  }
  throw new AppError('invalid_request', 'cursor is not one this API returned');
}
