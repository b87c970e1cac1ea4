/**
 * Platform administration (platform admins; the API refuses anyone else with 403, whose text these
 * pages show): relays (register, shown-once node token, remove), signing keys (rotate, revoke with a
 * typed confirmation) and tenants (list, set a plan).
 */
import { useState } from 'preact/hooks';
import { api, must, type paths } from '../api.ts';
import { useSession } from '../session.tsx';
import {
  Badge,
  Confirm,
  closing,
  Done,
  Empty,
  ErrorNote,
  Field,
  More,
  Page,
  SecretOnce,
  Table,
  Time,
  useAction,
  useLoad,
  usePaged,
} from '../ui/kit.tsx';

type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never;
type Relay = Json<paths['/admin/v1/relays']['get']['responses'][200]>['relays'][number];
type SigningKey = Json<paths['/admin/v1/signing-keys']['get']['responses'][200]>['keys'][number];
type Plan = Json<paths['/v1/plans']['get']['responses'][200]>['plans'][number];

const when = (at: string | null | undefined) => <Time at={at} />;

type ActProps = { label: string; of: string; danger?: boolean; disabled?: boolean; onClick: () => void };
/** A row's button, named with its row (a visually-hidden span would escape the table's scrolling). */
function RowAction({ label, of, danger, ...rest }: ActProps) {
  const look = danger ? 'danger small' : 'secondary small';
  return (
    <button type="button" class={look} aria-label={`${label} ${of}`} {...rest}>
      {label}
    </button>
  );
}

// Three columns, so the table fits 360 px: a scrolling table without a control in it fails axe's
// scrollable-region-focusable rule (kit's Table wrapper is not focusable).
const RELAY_HEAD = ['Relay', 'Health', 'Actions'];
const RELAY_FIELDS = [
  {
    name: 'region',
    label: 'Region',
    required: true,
    hint: 'Lowercase letters, digits and dashes, e.g. eu-west-1.',
  },
  { name: 'host', label: 'Host', required: true, hint: 'The name or address clients connect to.' },
  { name: 'port', label: 'Port', required: true, type: 'number', min: 1, max: 65535 },
  {
    name: 'cert',
    label: 'Client certificate SHA-256 (optional)',
    hint: '64 hex digits (colons allowed): the relay may then authenticate with that certificate instead of its token.',
  },
] as const;
const NO_RELAY = { region: '', host: '', port: '', cert: '' };

export function Relays() {
  const { session } = useSession();
  const list = usePaged<Relay>(async (cursor) => {
    const body = await must(api.GET('/admin/v1/relays', { params: { query: { cursor } } }));
    return { items: body.relays, next: body.next_cursor };
  });
  const [form, setForm] = useState(NO_RELAY);
  const [token, setToken] = useState<{ relay: Relay; token: string }>();
  const [removing, setRemoving] = useState<Relay>();
  const [done, setDone] = useState<string>();

  const register = useAction(async () => {
    setDone(undefined);
    const cert = form.cert.trim();
    const body = await must(
      api.POST('/admin/v1/relays', {
        body: {
          region: form.region.trim(),
          host: form.host.trim(),
          port: Number(form.port),
          ...(cert ? { client_certificate_sha256: cert } : {}),
        },
      }),
    );
    setToken(body);
    setForm(NO_RELAY);
    list.reload();
  });
  const remove = useAction(async () => {
    if (!removing) return;
    await must(api.DELETE('/admin/v1/relays/{relay_id}', { params: { path: { relay_id: removing.id } } }));
    setDone(`Removed relay ${removing.host}:${removing.port}.`);
    setRemoving(undefined);
    list.reload();
  });

  return (
    <Page title="Relays">
      <ErrorNote error={list.error} />
      {token && (
        <SecretOnce
          label={`Node token for ${token.relay.host}:${token.relay.port}`}
          value={token.token}
          onDismiss={() => setToken(undefined)}
        />
      )}
      {done && <Done>{done}</Done>}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title="No relays yet">Register one below, or declare them in RELAYPLANE_RELAYS_FILE.</Empty>
      )}
      {list.items.length > 0 && (
        <Table caption="Relays" head={RELAY_HEAD}>
          {list.items.map((r) => (
            <tr key={r.id}>
              <td>
                <span class="mono">{r.url}</span>
                <div class="muted mono">{r.id}</div>
                <div>Region {r.region}</div>
                {!r.static && <div class="muted">Registered {when(r.created_at)}</div>}
              </td>
              <td>
                <Badge tone={r.status === 'healthy' ? 'ok' : 'bad'}>{r.status}</Badge>{' '}
                {r.static && <Badge>static</Badge>}
                <div>Load {Math.round(r.load * 100)} %</div>
                {!r.static && <div class="muted">Last heartbeat {when(r.last_heartbeat_at)}</div>}
              </td>
              <td>
                {r.static ? (
                  <span class="muted">Static (relays file)</span>
                ) : (
                  <RowAction label="Remove" of={r.url} onClick={() => setRemoving(r)} />
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} />
      {session.user.platform_admin && (
        <section aria-labelledby="register-h">
          <h2 id="register-h">Register a relay</h2>
          <form
            class="card"
            style={{ maxWidth: '36rem' }}
            onSubmit={(e) => {
              e.preventDefault();
              void register.run();
            }}
          >
            {RELAY_FIELDS.map((f) => (
              <Field
                key={f.name}
                {...f}
                value={form[f.name]}
                onInput={(e) => setForm({ ...form, [f.name]: e.currentTarget.value })}
              />
            ))}
            <ErrorNote error={register.error} />
            <button type="submit" disabled={register.busy}>
              {register.busy ? 'Working…' : 'Register relay'}
            </button>
          </form>
        </section>
      )}
      <Confirm
        open={removing !== undefined}
        title="Remove this relay?"
        confirmLabel="Remove relay"
        danger
        busy={remove.busy}
        error={remove.error}
        onConfirm={() => void remove.run()}
        onCancel={closing(() => setRemoving(undefined), remove)}
      >
        <p>
          Relay <span class="mono">{removing?.url}</span> ({removing?.region}) is removed and its node token
          stops working: its heartbeats, revocation feed and introspection calls are refused. Registering it
          again gives a new token.
        </p>
      </Confirm>
    </Page>
  );
}

const KEY_HEAD = ['Key ID', 'State', 'Created', 'Started signing', 'Retired', 'Removed', 'Actions'];
const KEY_TONE = { active: 'ok', next: 'info', previous: 'warn', removed: 'bad' } as const;

export function SigningKeys() {
  const { session } = useSession();
  const [pendingSince, setPendingSince] = useState<string | null>(null);
  const list = usePaged<SigningKey>(async (cursor) => {
    const body = await must(api.GET('/admin/v1/signing-keys', { params: { query: { cursor } } }));
    if (cursor === undefined) setPendingSince(body.rotation_pending_since);
    return { items: body.keys, next: body.next_cursor };
  });
  const [rotating, setRotating] = useState(false);
  const [revoking, setRevoking] = useState<SigningKey>();
  const [done, setDone] = useState<string>();

  const rotate = useAction(async () => {
    setDone(undefined);
    const body = await must(api.POST('/admin/v1/signing-keys/rotate'));
    setRotating(false);
    setDone(
      body.rotation_pending_since
        ? 'Rotation requested: the next key is still too new to sign; it becomes active by itself when eligible.'
        : 'Rotated: the next key signs now and the active key became previous.',
    );
    list.reload();
  });
  const revoke = useAction(async () => {
    if (!revoking) return;
    const body = await must(
      api.POST('/admin/v1/signing-keys/{kid}/revoke', { params: { path: { kid: revoking.kid } } }),
    );
    setRevoking(undefined);
    setDone(
      body.already_revoked
        ? `Key ${body.revoked.kid} had been revoked already: nothing changed.`
        : `Revoked key ${body.revoked.kid}.${body.active ? ` Key ${body.active.kid} signs now.` : ' No key signs now: issuance answers 503 until the issuer makes one.'}`,
    );
    list.reload();
  });

  return (
    <Page
      title="Signing keys"
      actions={
        session.user.platform_admin && (
          <button type="button" onClick={() => setRotating(true)}>
            Rotate
          </button>
        )
      }
    >
      <p class="muted">States: next → active → previous → removed. The active key signs relay credentials.</p>
      <ErrorNote error={list.error} />
      {done && <Done>{done}</Done>}
      {pendingSince && (
        <Done>
          A rotation is pending since {when(pendingSince)}: it completes when the next key is eligible.
        </Done>
      )}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title="No signing keys yet">
          The issuer creates the first key when it starts: reload this page in a moment.
        </Empty>
      )}
      {list.items.length > 0 && (
        <Table caption="Signing keys" head={KEY_HEAD}>
          {list.items.map((k) => (
            <tr key={k.kid}>
              <td class="mono">{k.kid}</td>
              <td>
                <Badge tone={KEY_TONE[k.state]}>{k.state}</Badge>
                {k.eligible_at && <div class="muted">Eligible {when(k.eligible_at)}</div>}
                {k.remove_after && !k.removed_at && (
                  <div class="muted">Leaves after {when(k.remove_after)}</div>
                )}
              </td>
              <td>{when(k.created_at)}</td>
              <td>{when(k.activated_at)}</td>
              <td>{when(k.deactivated_at)}</td>
              <td>{when(k.removed_at)}</td>
              <td>
                {k.state !== 'removed' && (
                  <RowAction label="Revoke" of={k.kid} danger onClick={() => setRevoking(k)} />
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} />
      <Confirm
        open={rotating}
        title="Rotate the signing key?"
        confirmLabel="Rotate"
        busy={rotate.busy}
        error={rotate.error}
        onConfirm={() => void rotate.run()}
        onCancel={closing(() => setRotating(false), rotate)}
      >
        <p>
          The next key becomes active and the active key previous; credentials already signed keep verifying
          until they expire. If the next key has been published for less than 300 s, the rotation is recorded
          as pending and completes by itself when it is eligible.
        </p>
      </Confirm>
      <Confirm
        open={revoking !== undefined}
        title={`Revoke signing key ${revoking?.kid ?? ''}?`}
        confirmLabel="Revoke key"
        typed={revoking?.kid}
        danger
        busy={revoke.busy}
        error={revoke.error}
        onConfirm={() => void revoke.run()}
        onCancel={closing(() => setRevoking(undefined), revoke)}
      >
        <p>
          An emergency, not a rotation, and it cannot be undone: the key leaves the JWKS at once and its
          private half is destroyed. <strong>Every credential signed by it stops verifying</strong>: relay
          assignment refuses it (401), introspection answers inactive and the revocation feed tells verifiers
          to refuse it.
          {revoking?.state === 'active' && ' The next key (or a new one) starts signing at once.'}
        </p>
      </Confirm>
    </Page>
  );
}

type TenantOverview = Json<paths['/admin/v1/tenants']['get']['responses'][200]>['tenants'][number];

async function allPlans(): Promise<Plan[]> {
  const plans: Plan[] = [];
  let cursor: string | undefined;
  do {
    const body = await must(api.GET('/v1/plans', { params: { query: { cursor } } }));
    plans.push(...body.plans);
    cursor = body.next_cursor ?? undefined;
  } while (cursor);
  return plans;
}

type RowProps = { tenant: TenantOverview; plans: Plan[]; onSet: (t: TenantOverview, plan: Plan) => void };

function TenantRow({ tenant, plans, onSet }: RowProps) {
  const [choice, setChoice] = useState<string>(tenant.plan_id);
  const chosen = plans.find((p) => p.id === choice);
  return (
    <tr>
      <td>
        {tenant.name}
        <div class="muted mono">{tenant.id}</div>
      </td>
      <td>{when(tenant.created_at)}</td>
      <td>{tenant.member_count}</td>
      <td>
        <div class="actions">
          <select
            aria-label={`Plan for ${tenant.name}`}
            value={choice}
            onChange={(e) => setChoice(e.currentTarget.value)}
          >
            {!chosen && <option value={choice}>{choice}</option>}
            {plans.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name}
              </option>
            ))}
          </select>
          <RowAction
            label="Set plan"
            of={`for ${tenant.name}`}
            disabled={choice === tenant.plan_id || !chosen}
            onClick={() => chosen && onSet(tenant, chosen)}
          />
        </div>
      </td>
    </tr>
  );
}

export function Tenants() {
  const plans = useLoad(allPlans);
  const list = usePaged<TenantOverview>(async (cursor) => {
    const body = await must(api.GET('/admin/v1/tenants', { params: { query: { cursor } } }));
    return { items: body.tenants, next: body.next_cursor };
  });
  const [setting, setSetting] = useState<{ tenant: TenantOverview; plan: Plan }>();
  const [done, setDone] = useState<string>();
  const [changed, setChanged] = useState<Record<string, Plan['id']>>({});
  const planName = (id: string) => plans.data?.find((p) => p.id === id)?.name ?? id;

  const apply = useAction(async () => {
    if (!setting) return;
    const { tenant, plan } = setting;
    const body = await must(
      api.PUT('/admin/v1/tenants/{tenant_id}/plan', {
        params: { path: { tenant_id: tenant.id } },
        body: { plan: plan.id },
      }),
    );
    setChanged((c) => ({ ...c, [tenant.id]: plan.id }));
    setDone(`${tenant.name} is now on ${planName(body.plan)}.`);
    setSetting(undefined);
  });

  const current = setting ? (changed[setting.tenant.id] ?? setting.tenant.plan_id) : '';
  return (
    <Page title="Tenants">
      <ErrorNote error={list.error} />
      <ErrorNote error={plans.error} />
      {done && <Done>{done}</Done>}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title="No tenants yet">Tenants are created when someone signs up.</Empty>
      )}
      {list.items.length > 0 && (
        <Table caption="Tenants, oldest first" head={['Tenant', 'Created', 'Members', 'Plan']}>
          {list.items.map((t) => {
            const tenant = { ...t, plan_id: changed[t.id] ?? t.plan_id };
            return (
              <TenantRow
                key={`${t.id}:${tenant.plan_id}`}
                tenant={tenant}
                plans={plans.data ?? []}
                onSet={(tn, plan) => setSetting({ tenant: tn, plan })}
              />
            );
          })}
        </Table>
      )}
      <More list={list} />
      <Confirm
        open={setting !== undefined}
        title={`Change the plan of ${setting?.tenant.name ?? ''}?`}
        confirmLabel={`Set ${setting?.plan.name ?? ''}`}
        busy={apply.busy}
        error={apply.error}
        onConfirm={() => void apply.run()}
        onCancel={closing(() => setSetting(undefined), apply)}
      >
        <p>
          {setting?.tenant.name} moves from {planName(current)} to {setting?.plan.name} on every replica at
          once, without payment. On a lower plan, credentials already issued live out their TTL but new ones
          over the new cap are refused (402); existing projects and keys stay, new ones over a lowered limit
          are refused.
        </p>
      </Confirm>
    </Page>
  );
}
