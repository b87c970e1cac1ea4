/**
 * audit checkpoints, and audit verify --checkpoints <file>: signed checkpoints of the tenant's
 * audit chain, saved outside Relayplane and checked later, offline, with the key saved with them
 * (docs/audit.md, "Signed checkpoints"). What the check proves and what it does not is there too.
 */
import { createPublicKey, type JsonWebKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { openCheckpoint } from '@relayplane/contract/audit-checkpoint';
import type { AuditCheckpoint, AuditEvent, AuditKeys } from '../api-types.ts';
import type { Context } from '../command.ts';
import { CliError, EXIT, UsageError } from '../errors.ts';
import { renderFields } from '../output.ts';

interface Jwk extends JsonWebKey {
  kid: string;
}

/** What `audit checkpoints --json` prints, and `audit verify --checkpoints` reads. */
export interface CheckpointFile {
  checkpoints: AuditCheckpoint[];
  keys: { keys: Jwk[] };
}

type LiveEvent = Pick<AuditEvent, 'seq' | 'hash' | 'prev_hash' | 'action' | 'details'>;

async function allPages<T>(ctx: Context, path: string, field: string): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | null = null;
  do {
    const qs: string = `limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const { body } = await ctx.api.request<Record<string, unknown> & { next_cursor: string | null }>(
      'GET',
      `${path}?${qs}`,
      { auth: ctx.bearer() },
    );
    out.push(...((body[field] as T[]) ?? []));
    cursor = body.next_cursor;
  } while (cursor);
  return out;
}

/** Signs the head now, then every checkpoint of the chain and the public key, ready to save. */
export async function fetchCheckpoints(ctx: Context): Promise<CheckpointFile> {
  await ctx.api.request('POST', '/admin/v1/audit-events/checkpoints', { auth: ctx.bearer() });
  const checkpoints = await allPages<AuditCheckpoint>(
    ctx,
    '/admin/v1/audit-events/checkpoints',
    'checkpoints',
  );
  const { body: keys } = await ctx.api.request<AuditKeys>('GET', '/v1/audit/keys');
  return { checkpoints, keys };
}

/** The checkpoint's payload when `key` signed it (EdDSA compact JWS), else undefined. */
function openWith(jws: string, key: Jwk) {
  try {
    return openCheckpoint(jws, createPublicKey({ key: key as JsonWebKey, format: 'jwk' }), key.kid);
  } catch {
    return undefined;
  }
}

export interface OfflineResult {
  ok: boolean;
  checkpoints_checked: number;
  /** The first position where the live chain disagrees with a saved checkpoint (null: none). */
  first_bad_seq: number | null;
  problems: string[];
}

/**
 * Checks the live chain against checkpoints saved earlier, with the key saved with them: each
 * checkpoint's signature; the live event at its `seq` has its hash; a checkpoint older than the
 * live chain is accounted for by an `audit.prune` event whose anchor covers it (and, at the
 * anchor itself, has its hash); and the live events link to each other.
 */
export function checkOffline(file: CheckpointFile, live: LiveEvent[], currentKids: string[]): OfflineResult {
  const problems: string[] = [];
  const bad: number[] = [];
  const bySeq = new Map(live.map((e) => [e.seq, e]));
  const prunes = live
    .filter((e) => e.action === 'audit.prune')
    .map((e) => ({ seq: Number(e.details.anchor_seq), hash: String(e.details.anchor_hash) }));
  const anchor = prunes.reduce((max, p) => (p.seq > max.seq ? p : max), { seq: 0, hash: '' });
  const keys = new Map(file.keys.keys.map((k) => [k.kid, k]));
  for (const kid of keys.keys()) {
    if (!currentKids.includes(kid)) problems.push(`the server no longer publishes the audit key ${kid}`);
  }
  let checked = 0;
  for (const cp of [...file.checkpoints].sort((a, b) => a.seq - b.seq)) {
    const key = keys.get(cp.kid);
    const signed = key ? openWith(cp.jws, key) : undefined;
    if (!signed || signed.seq !== cp.seq || signed.hash !== cp.hash || signed.tenant_id !== cp.tenant_id) {
      problems.push(`checkpoint ${cp.seq}: not signed by a saved audit key`);
      bad.push(cp.seq);
      continue;
    }
    checked += 1;
    const event = bySeq.get(cp.seq);
    if (event) {
      if (event.hash !== cp.hash) {
        problems.push(`seq ${cp.seq}: the chain's hash differs from the checkpoint signed at ${cp.at}`);
        bad.push(cp.seq);
      }
    } else if (cp.seq > anchor.seq) {
      problems.push(`seq ${cp.seq}: the event is missing and no audit.prune event accounts for it`);
      bad.push(cp.seq);
    } else if (cp.seq === anchor.seq && anchor.hash !== cp.hash) {
      problems.push(`seq ${cp.seq}: the pruning anchor's hash differs from the checkpoint`);
      bad.push(cp.seq);
    }
  }
  const ordered = [...live].sort((a, b) => a.seq - b.seq);
  for (let i = 1; i < ordered.length; i++) {
    const [prev, next] = [ordered[i - 1], ordered[i]];
    if (prev && next && next.seq === prev.seq + 1 && next.prev_hash !== prev.hash) {
      problems.push(`seq ${next.seq}: does not name the event before it`);
      bad.push(next.seq);
    }
  }
  const first = bad.length ? Math.min(...bad) : null;
  return { ok: problems.length === 0, checkpoints_checked: checked, first_bad_seq: first, problems };
}

/** `audit verify --checkpoints <file>`. */
export async function verifyAgainstFile(
  ctx: Context,
  path: string,
  command: readonly string[],
): Promise<void> {
  let file: CheckpointFile;
  try {
    file = JSON.parse(readFileSync(path, 'utf8')) as CheckpointFile;
  } catch (err) {
    throw new UsageError(`cannot read checkpoints from ${path}: ${(err as Error).message}`, command);
  }
  if (!Array.isArray(file?.checkpoints) || !Array.isArray(file?.keys?.keys)) {
    throw new UsageError(`${path} is not what "relayplane audit checkpoints --json" saves`, command);
  }
  const live = await allPages<LiveEvent>(ctx, '/admin/v1/audit-events', 'events');
  const { body: keys } = await ctx.api.request<AuditKeys>('GET', '/v1/audit/keys');
  const result = checkOffline(
    file,
    live,
    keys.keys.map((k) => k.kid),
  );
  ctx.print(result, () =>
    renderFields(
      [
        ['Agrees with checkpoints', result.ok ? 'yes' : 'NO'],
        ['Checkpoints checked', String(result.checkpoints_checked)],
        ['First bad seq', result.first_bad_seq === null ? null : String(result.first_bad_seq)],
        ...result.problems.map((p) => ['Problem', p] as [string, string]),
      ],
      ctx.style,
    ),
  );
  if (!result.ok) {
    throw new CliError(
      EXIT.api,
      `the audit trail disagrees with the saved checkpoints${result.first_bad_seq === null ? '' : ` from seq ${result.first_bad_seq}`}`,
    );
  }
}
