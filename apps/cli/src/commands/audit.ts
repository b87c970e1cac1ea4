/** audit list, audit verify: the active tenant's audit trail (owners and admins). */
import { AUDIT_LIST_LIMIT } from '@relayplane/contract/contract';
import type { AuditEvent, AuditVerification } from '../api-types.ts';
import type { CommandSpec } from '../command.ts';
import { CliError, EXIT, UsageError } from '../errors.ts';
import { renderFields, renderTable } from '../output.ts';
import { stringValue } from '../parse.ts';
import { fetchCheckpoints, verifyAgainstFile } from './audit-checkpoints.ts';

const RELATIVE = /^([1-9][0-9]{0,5})([mhd])$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `--since`: an RFC 3339 time as is, or `30m`, `12h`, `7d` before now. */
function since(value: string | undefined, now: number, path: readonly string[]): string | undefined {
  if (value === undefined) return undefined;
  const rel = RELATIVE.exec(value);
  if (rel) return new Date(now - Number(rel[1]) * UNIT_MS[rel[2] as keyof typeof UNIT_MS]).toISOString();
  if (!Number.isNaN(Date.parse(value)) && /^\d{4}-\d{2}-\d{2}T/.test(value)) return value;
  throw new UsageError(
    `--since must be an RFC 3339 time (2026-11-25T12:00:00Z) or a duration like 30m, 12h, 7d (got "${value}")`,
    path,
  );
}

function limit(value: string | undefined, path: readonly string[]): string | undefined {
  if (value === undefined) return undefined;
  const n = /^[0-9]{1,4}$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= 1 && n <= AUDIT_LIST_LIMIT.max)) {
    throw new UsageError(
      `--limit must be a whole number from 1 to ${AUDIT_LIST_LIMIT.max} (got "${value}")`,
      path,
    );
  }
  return value;
}

const list: CommandSpec = {
  path: ['audit', 'list'],
  summary: "List the active tenant's audit events, newest first",
  description:
    'Every change made through the API and every login, logout and session revocation of the tenant\n' +
    '(docs/audit.md lists the actions). Filters: --action (e.g. api_key.revoke), --actor (a user, bot\n' +
    'or identity token id), --target (the id of what was changed), --since (RFC 3339, or 30m, 12h, 7d\n' +
    `before now). --limit 1..${AUDIT_LIST_LIMIT.max} (default ${AUDIT_LIST_LIMIT.default}); with --json the API's page as is,\n` +
    'including next_cursor. Needs the audit:read permission (owners and admins).',
  options: {
    action: { type: 'string', value: 'action', description: 'only this action, e.g. project.create' },
    actor: { type: 'string', value: 'id', description: 'only events by this user, bot or identity token' },
    target: { type: 'string', value: 'id', description: 'only events about this id' },
    since: {
      type: 'string',
      value: 'time',
      description: 'only events at or after: RFC 3339, or 30m, 12h, 7d',
    },
    limit: { type: 'string', value: 'n', description: `at most n events (1..${AUDIT_LIST_LIMIT.max})` },
  },
  examples: [
    'relayplane audit list',
    'relayplane audit list --action api_key.revoke --since 7d',
    'relayplane audit list --actor usr_0123456789abcdefghij --json',
  ],
  async run(ctx, { values }) {
    const query = new URLSearchParams();
    const set = (name: string, value: string | undefined) => {
      if (value !== undefined) query.set(name, value);
    };
    set('action', stringValue(values, 'action'));
    set('actor_id', stringValue(values, 'actor'));
    set('target_id', stringValue(values, 'target'));
    set('since', since(stringValue(values, 'since'), ctx.io.now(), this.path));
    set('limit', limit(stringValue(values, 'limit'), this.path));
    const qs = query.toString();
    const { body } = await ctx.api.request<{ events: AuditEvent[]; next_cursor: string | null }>(
      'GET',
      `/admin/v1/audit-events${qs === '' ? '' : `?${qs}`}`,
      { auth: ctx.bearer() },
    );
    ctx.print(body, () => {
      if (body.events.length === 0) return 'No audit events.\n';
      const table = renderTable(
        ['time', 'action', 'outcome', 'actor', 'target', 'ip'],
        body.events.map((e) => [
          e.occurred_at,
          e.action,
          e.outcome,
          e.actor.id === '' ? e.actor.type : `${e.actor.type}:${e.actor.id}`,
          `${e.target.type}:${e.target.id}`,
          e.ip,
        ]),
        ctx.style,
      );
      return body.next_cursor ? `${table}More events: narrow with --since or raise --limit.\n` : table;
    });
  },
};

const verify: CommandSpec = {
  path: ['audit', 'verify'],
  summary: "Check that the tenant's audit trail is intact",
  description:
    'The server recomputes the SHA-256 chain of every stored event (docs/audit.md, "The chain") and checks\n' +
    'its latest signed checkpoint and the pruning anchor. Exit 0 when intact; exit 1 and the first event\n' +
    'that does not hold when an event was edited or removed. With --checkpoints <file>: the live chain\n' +
    'against checkpoints saved earlier, verified here with the audit key saved with them (a chain\n' +
    'rewritten with recomputed hashes, or with its oldest events dropped, fails); exit 1 naming the\n' +
    'first bad sequence number.',
  options: {
    checkpoints: {
      type: 'string',
      value: 'file',
      description: 'check the live chain against checkpoints saved by "audit checkpoints --json", offline',
    },
  },
  examples: [
    'relayplane audit verify',
    'relayplane audit verify --json',
    'relayplane audit checkpoints --json > checkpoints.json && relayplane audit verify --checkpoints checkpoints.json',
  ],
  async run(ctx, { values }) {
    const file = stringValue(values, 'checkpoints');
    if (file !== undefined) {
      await verifyAgainstFile(ctx, file, this.path);
      return;
    }
    const { body } = await ctx.api.request<AuditVerification>('GET', '/admin/v1/audit-events/verify', {
      auth: ctx.bearer(),
    });
    ctx.print(body, () =>
      renderFields(
        [
          ['Intact', body.ok ? 'yes' : 'NO'],
          ['Events checked', String(body.events_checked)],
          ['First bad event', body.first_bad_id],
        ],
        ctx.style,
      ),
    );
    if (!body.ok) {
      throw new CliError(
        EXIT.api,
        `the audit trail is not intact: ${body.first_bad_id ? `event ${body.first_bad_id} does not hold` : 'its newest events are missing'}`,
      );
    }
  },
};

const checkpoints: CommandSpec = {
  path: ['audit', 'checkpoints'],
  summary: "Sign the audit chain's head now and print every signed checkpoint, with the public key",
  description:
    'Each checkpoint is the chain head {tenant_id, seq, hash, at} signed with the audit key, which is\n' +
    'kept out of the database. Save the JSON somewhere Relayplane cannot write, and check the chain\n' +
    'against it later: relayplane audit verify --checkpoints <file>.',
  examples: ['relayplane audit checkpoints --json > checkpoints.json'],
  async run(ctx) {
    const saved = await fetchCheckpoints(ctx);
    ctx.print(saved, () =>
      saved.checkpoints.length === 0
        ? 'No checkpoint yet (the chain is empty).\n'
        : renderTable(
            ['seq', 'hash', 'signed at', 'kid'],
            saved.checkpoints.map((c) => [String(c.seq), c.hash, c.at, c.kid]),
            ctx.style,
          ),
    );
  },
};

export const AUDIT_COMMANDS: readonly CommandSpec[] = [list, verify, checkpoints];
