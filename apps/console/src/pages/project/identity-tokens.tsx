/**
 * Identity tokens of a project's bots (`identity_id` is the bot's id): for the bot chosen
 * (`?bot=`), its tokens (list, create with scopes and an expiry, the token shown once, revoke).
 */
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { api, type components, must } from '../../api.ts';
import { paths } from '../../routes.ts';
import { can, useSession } from '../../session.tsx';
import {
  Badge,
  Check,
  Confirm,
  Done,
  Empty,
  ErrorNote,
  More,
  SecretOnce,
  Select,
  Table,
  Time,
  useAction,
  useLoad,
  usePaged,
} from '../../ui/kit.tsx';
import type { TabProps } from './tab.ts';

type Bot = components['schemas']['Bot'];
type IdentityToken = components['schemas']['IdentityToken'];
type Scope = IdentityToken['scopes'][number];

/**
 * What a bot's role grants (docs/iam.md, the permission matrix): a token's scopes must be among
 * them and held by the caller, else 403.
 */
const GRANTED: Record<Bot['role'], Scope[]> = {
  developer: [
    'projects:read',
    'api_keys:read',
    'api_keys:write',
    'allowlist:read',
    'allowlist:write',
    'bots:read',
    'identity_tokens:read',
    'identity_tokens:write',
  ],
  viewer: ['projects:read', 'api_keys:read', 'allowlist:read', 'bots:read', 'identity_tokens:read'],
};

const HOUR = 3600_000;
const EXPIRIES = [
  { value: '1', label: '1 hour' },
  { value: '8', label: '8 hours' },
  { value: '24', label: '1 day' },
  { value: '168', label: '7 days' },
  { value: '720', label: '30 days (the most)' },
];

function tokenLabel(t: { display_prefix: string; last_four: string }): string {
  return `${t.display_prefix}…${t.last_four}`;
}

function CreateToken({
  projectId,
  bot,
  held,
  onCreated,
}: {
  projectId: string;
  bot: Bot;
  held: string[];
  onCreated: (value: string, expiresAt: string) => void;
}) {
  const offered = GRANTED[bot.role].filter((s) => held.includes(s));
  const [scopes, setScopes] = useState<Scope[]>(offered.filter((s) => s.endsWith(':read')));
  const [hours, setHours] = useState('1');
  const create = useAction(async () => {
    if (scopes.length === 0) throw new Error('Choose at least one scope.');
    // At most 30 days ahead: a minute less, so the request's time in transit never exceeds it.
    const ms = Number(hours) * HOUR - (hours === '720' ? 60_000 : 0);
    const r = await must(
      api.POST('/v1/projects/{project_id}/identities/{identity_id}/tokens', {
        params: { path: { project_id: projectId, identity_id: bot.id } },
        body: { scopes, expires_at: new Date(Date.now() + ms).toISOString() },
      }),
    );
    onCreated(r.value, r.expires_at);
  });
  return (
    <form
      class="card"
      aria-labelledby="create-token"
      onSubmit={(e) => {
        e.preventDefault();
        void create.run();
      }}
    >
      <h2 id="create-token">Create an identity token for {bot.name}</h2>
      <fieldset class="prj-group">
        <legend>Scopes</legend>
        <small class="hint">
          The token holds exactly these. Listed: what the bot's role ({bot.role}) grants and you hold.
        </small>
        <div class="prj-choices">
          {offered.map((s) => (
            <Check
              key={s}
              label={s}
              checked={scopes.includes(s)}
              onChange={(on) => setScopes((old) => (on ? [...old, s] : old.filter((x) => x !== s)))}
            />
          ))}
        </div>
      </fieldset>
      <Select
        label="Expires in"
        name="expires"
        value={hours}
        options={EXPIRIES}
        onChange={(e) => setHours(e.currentTarget.value)}
      />
      <ErrorNote error={create.error} />
      <button type="submit" disabled={create.busy || offered.length === 0}>
        {create.busy ? 'Working…' : 'Create identity token'}
      </button>
    </form>
  );
}

function Tokens({ projectId, bot }: { projectId: string; bot: Bot }) {
  const { session } = useSession();
  const writable = can(session, 'identity_tokens:write');
  const [secret, setSecret] = useState<{ value: string; expiresAt: string }>();
  const [target, setTarget] = useState<IdentityToken>();
  const [revoked, setRevoked] = useState<string>();
  const list = usePaged(
    async (cursor) => {
      const page = await must(
        api.GET('/v1/projects/{project_id}/identities/{identity_id}/tokens', {
          params: { path: { project_id: projectId, identity_id: bot.id }, query: { cursor } },
        }),
      );
      return { items: page.identity_tokens, next: page.next_cursor };
    },
    [bot.id],
  );
  const revoke = useAction(async () => {
    if (!target) return;
    const t = await must(
      api.DELETE('/v1/projects/{project_id}/identities/{identity_id}/tokens/{token_id}', {
        params: { path: { project_id: projectId, identity_id: bot.id, token_id: target.id } },
      }),
    );
    setRevoked(tokenLabel(t));
    setTarget(undefined);
    list.reload();
  });

  return (
    <section aria-labelledby="tokens-of">
      <h2 id="tokens-of">Identity tokens of {bot.name}</h2>
      {secret && (
        <SecretOnce
          label={`Identity token for ${bot.name}`}
          value={secret.value}
          onDismiss={() => setSecret(undefined)}
        />
      )}
      {secret && (
        <p class="muted">
          It expires <Time at={secret.expiresAt} />. Send it as{' '}
          <code>Authorization: Bearer &lt;token&gt;</code>.
        </p>
      )}
      {revoked && <Done>Identity token {revoked} revoked: it stopped authenticating at once.</Done>}
      <ErrorNote error={list.error} />
      {list.loading && list.items.length === 0 && !list.error && <p class="muted">Loading tokens…</p>}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title={`${bot.name} has no identity tokens`}>
          {writable ? 'Create one below with only the scopes its holder needs.' : 'Nothing to show.'}
        </Empty>
      )}
      {list.items.length > 0 && (
        <Table
          caption={`Identity tokens of ${bot.name}`}
          head={['Token', 'Scopes', 'Created', 'Expires', 'Last used', 'Status', 'Actions']}
        >
          {list.items.map((t) => {
            const expired = Date.parse(t.expires_at) <= Date.now();
            return (
              <tr key={t.id}>
                <td>
                  <code class="prj-nowrap">{tokenLabel(t)}</code>
                </td>
                <td>{t.scopes.join(', ')}</td>
                <td>
                  <Time at={t.created_at} />
                </td>
                <td>
                  <Time at={t.expires_at} />
                </td>
                <td>
                  <Time at={t.last_used_at} />
                </td>
                <td>
                  {t.revoked_at ? (
                    <Badge tone="bad">revoked</Badge>
                  ) : expired ? (
                    <Badge>expired</Badge>
                  ) : (
                    <Badge tone="ok">active</Badge>
                  )}
                </td>
                <td>
                  {writable && !t.revoked_at && !expired && (
                    <button
                      type="button"
                      class="danger small"
                      aria-label={`Revoke identity token ${tokenLabel(t)}`}
                      onClick={() => {
                        revoke.setError(undefined);
                        setTarget(t);
                      }}
                    >
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            );
          })}
        </Table>
      )}
      <More list={list} />
      {writable && (
        <CreateToken
          projectId={projectId}
          bot={bot}
          held={session.permissions}
          onCreated={(value, expiresAt) => {
            setRevoked(undefined);
            setSecret({ value, expiresAt });
            list.reload();
          }}
        />
      )}
      <Confirm
        open={target !== undefined}
        title="Revoke this identity token?"
        confirmLabel="Revoke token"
        danger
        busy={revoke.busy}
        error={revoke.error}
        onConfirm={() => void revoke.run()}
        onCancel={() => setTarget(undefined)}
      >
        {target && (
          <p>
            Token <code>{tokenLabel(target)}</code> of bot <strong>{bot.name}</strong> stops authenticating at
            once. The bot, its keys and its other tokens stay. This cannot be undone.
          </p>
        )}
      </Confirm>
    </section>
  );
}

export function IdentityTokens({ project }: TabProps) {
  const { query, route } = useLocation();
  const bots = useLoad(async () => {
    const all: Bot[] = [];
    let cursor: string | undefined;
    do {
      const page = await must(
        api.GET('/admin/v1/projects/{project_id}/bots', {
          params: { path: { project_id: project.id }, query: { limit: '200', cursor } },
        }),
      );
      all.push(...page.bots);
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined && all.length < 1000);
    return all;
  }, [project.id]);
  const list = bots.data ?? [];
  const bot = list.find((b) => b.id === query.bot) ?? list[0];

  return (
    <div>
      <h2>Identity tokens</h2>
      <p>
        An identity token (<code>rpi_…</code>) acts as one of the project's bots with only the scopes it was
        given, until it expires (at most 30 days).
      </p>
      <ErrorNote error={bots.error} />
      {bots.loading && !bots.data && <p class="muted">Loading bots…</p>}
      {bots.data && list.length === 0 && (
        <Empty title="Create a bot first">
          Identity tokens act as a bot: create one on the <a href={paths.project(project.id, 'bots')}>Bots</a>{' '}
          tab.
        </Empty>
      )}
      {bot && (
        <>
          <Select
            label="Bot"
            value={bot.id}
            options={list.map((b) => ({ value: b.id, label: `${b.name} (${b.role})` }))}
            onChange={(e) =>
              route(
                `${paths.project(project.id, 'identity-tokens')}?bot=${encodeURIComponent(e.currentTarget.value)}`,
              )
            }
          />
          <Tokens key={bot.id} projectId={project.id} bot={bot} />
        </>
      )}
    </div>
  );
}
