/**
 * Signed checkpoints of the audit chains (issue 31; docs/audit.md, "Signed checkpoints"): each
 * chain's head `{tenant_id, seq, hash, at}` signed with the audit key, which is not in the
 * database. A tenant that saved a checkpoint can later prove that the chain it reads still
 * passes through that head; the server checks its own latest checkpoint on every verification.
 */
import type { Logger } from '@relayplane/shared/logger';
import { type Kysely, sql } from 'kysely';
import type { AdminDatabase } from '../db/schema.ts';
import { PLATFORM_CHAIN } from './canonical.ts';
import type { AuditSigningKey } from './checkpoint-key.ts';

/** The scheduler job that signs every chain head that moved (docs/audit.md, "Signed checkpoints"). */
export const AUDIT_CHECKPOINT_JOB = 'audit-checkpoint';

export interface StoredCheckpoint {
  chainKey: string;
  tenantId: string | null;
  seq: number;
  hash: string;
  at: Date;
  kid: string;
  jws: string;
}

/** What the latest checkpoint and the pruning anchor say about a chain (VerifyAuditEvents). */
export interface AnchorsResult {
  /** The latest checkpoint's position, or 0 when the chain has none. */
  checkpointSeq: number;
  /** It is signed by the audit key, its row is what it signed, and the chain holds its hash at its seq. */
  checkpointOk: boolean;
  /** The pruning anchor, when there is one, matches the `audit.prune` event that moved it. */
  anchorOk: boolean;
  /** The first position found bad by these checks (0: none). */
  firstBadSeq: number;
}

const num = (v: string | number | bigint) => Number(v);
const tenantOf = (chainKey: string) => (chainKey === PLATFORM_CHAIN ? null : chainKey);

export class AuditCheckpoints {
  readonly #db: Kysely<AdminDatabase>;
  readonly #key: AuditSigningKey;
  readonly #logger: Logger;

  constructor(db: Kysely<AdminDatabase>, key: AuditSigningKey, logger: Logger) {
    this.#db = db;
    this.#key = key;
    this.#logger = logger;
  }

  get key(): AuditSigningKey {
    return this.#key;
  }

  /** Signs the chain's head unless its latest checkpoint already has it; answers the latest. */
  async checkpoint(chainKey: string, now: Date): Promise<StoredCheckpoint | undefined> {
    const head = await this.#db
      .selectFrom('audit_chain_heads')
      .select(['seq', 'hash'])
      .where('chain_key', '=', chainKey)
      .executeTakeFirst();
    if (!head || num(head.seq) === 0) return undefined;
    const latest = await this.latest(chainKey);
    if (latest && latest.seq >= num(head.seq)) return latest;
    const payload = {
      tenant_id: tenantOf(chainKey),
      seq: num(head.seq),
      hash: head.hash,
      at: now.toISOString(),
    };
    const jws = this.#key.sign(payload);
    await this.#db
      .insertInto('audit_checkpoints')
      .values({
        chain_key: chainKey,
        seq: String(payload.seq),
        hash: payload.hash,
        at: now,
        kid: this.#key.kid,
        jws,
      })
      .onConflict((oc) => oc.columns(['chain_key', 'seq']).doNothing())
      .execute();
    return this.latest(chainKey);
  }

  /** Every chain whose head moved since its latest checkpoint; answers how many were signed. */
  async checkpointAll(now: Date): Promise<number> {
    const moved = await this.#db
      .selectFrom('audit_chain_heads as h')
      .select('h.chain_key')
      .where((eb) =>
        eb(
          'h.seq',
          '>',
          eb.fn.coalesce(
            eb
              .selectFrom('audit_checkpoints as c')
              .select((e) => e.fn.max('c.seq').as('m'))
              .whereRef('c.chain_key', '=', 'h.chain_key'),
            eb.val('0'),
          ),
        ),
      )
      .execute();
    for (const { chain_key } of moved) await this.checkpoint(chain_key, now);
    if (moved.length > 0) this.#logger.info({ chains: moved.length }, 'audit checkpoints signed');
    return moved.length;
  }

  async latest(chainKey: string): Promise<StoredCheckpoint | undefined> {
    const [row] = await this.list(chainKey, 1);
    return row;
  }

  /** Newest first; `beforeSeq`: the cursor. */
  async list(chainKey: string, limit: number, beforeSeq?: number): Promise<StoredCheckpoint[]> {
    let q = this.#db
      .selectFrom('audit_checkpoints')
      .selectAll()
      .where('chain_key', '=', chainKey)
      .orderBy('seq', 'desc')
      .limit(limit);
    if (beforeSeq !== undefined) q = q.where('seq', '<', String(beforeSeq));
    const rows = await q.execute();
    return rows.map((r) => ({
      chainKey: r.chain_key,
      tenantId: tenantOf(r.chain_key),
      seq: num(r.seq),
      hash: r.hash,
      at: r.at,
      kid: r.kid,
      jws: r.jws,
    }));
  }

  /**
   * The latest checkpoint against the chain, and the pruning anchor against its `audit.prune`
   * event. A checkpoint of a position pruned since is checked when it is the anchor itself, and
   * otherwise left to the anchor's check (the prune event that moved the anchor is chained, and
   * a later checkpoint covers it).
   */
  async check(chainKey: string): Promise<AnchorsResult> {
    const head = await this.#db
      .selectFrom('audit_chain_heads')
      .select(['anchor_seq', 'anchor_hash'])
      .where('chain_key', '=', chainKey)
      .executeTakeFirst();
    const anchorSeq = head ? num(head.anchor_seq) : 0;
    let anchorOk = true;
    if (head && anchorSeq > 0) {
      const prune = await this.#db
        .selectFrom('audit_events')
        .select('seq')
        .where('chain_key', '=', chainKey)
        .where('action', '=', 'audit.prune')
        .where(sql<string>`details->>'anchor_seq'`, '=', String(anchorSeq))
        .where(sql<string>`details->>'anchor_hash'`, '=', head.anchor_hash)
        .executeTakeFirst();
      anchorOk = prune !== undefined;
    }
    const cp = await this.latest(chainKey);
    if (!cp)
      return { checkpointSeq: 0, checkpointOk: true, anchorOk, firstBadSeq: anchorOk ? 0 : anchorSeq + 1 };
    const signed = this.#key.open(cp.jws);
    let checkpointOk =
      signed !== undefined &&
      signed.seq === cp.seq &&
      signed.hash === cp.hash &&
      signed.tenant_id === tenantOf(chainKey);
    if (checkpointOk) {
      const event = await this.#db
        .selectFrom('audit_events')
        .select('hash')
        .where('chain_key', '=', chainKey)
        .where('seq', '=', String(cp.seq))
        .executeTakeFirst();
      if (event) checkpointOk = event.hash === cp.hash;
      else if (cp.seq === anchorSeq) checkpointOk = head?.anchor_hash === cp.hash;
      else checkpointOk = cp.seq < anchorSeq;
    }
    const bad = [!checkpointOk ? cp.seq : 0, !anchorOk ? anchorSeq + 1 : 0].filter((s) => s > 0);
    return { checkpointSeq: cp.seq, checkpointOk, anchorOk, firstBadSeq: bad.length ? Math.min(...bad) : 0 };
  }
}
