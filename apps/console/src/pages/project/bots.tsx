/**
 * A project's bots (machine identities with a project role) and, for the bot chosen
 * (`?bot=`), its keys: list, create (the bot token shown once), revoke.
 */
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { api, type components, must } from '../../api.ts';
import { paths } from '../../routes.ts';
import { can, useSession } from '../../session.tsx';
import {
  Badge,
  Confirm,
  Done,
  Empty,
  ErrorNote,
  Field,
  More,
  SecretOnce,
  Select,
  Table,
  Time,
  useAction,
  usePaged,
} from '../../ui/kit.tsx';
import type { TabProps } from './tab.ts';

type Bot = components['schemas']['Bot'];
type BotKey = components['schemas']['BotKey'];
type Role = Bot['role'];

function CreateBot({ projectId, onCreated }: { projectId: string; onCreated: (bot: Bot) => void }) {
  const [name, setName] = useState('');
  const [role, setRole] = useState<Role>('developer');
  const create = useAction(async () => {
    const bot = await must(
      api.POST('/admin/v1/projects/{project_id}/bots', {
        params: { path: { project_id: projectId } },
        body: { name: name.trim(), role },
      }),
    );
    setName('');
    onCreated(bot);
  });
  return (
    <form
      class="card"
      aria-labelledby="create-bot"
      onSubmit={(e) => {
        e.preventDefault();
        void create.run();
      }}
    >
      <h2 id="create-bot">Create a bot</h2>
      <div class="prj-form-grid">
        <Field
          label="Name"
          name="name"
          required
          maxLength={64}
          autoComplete="off"
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
        />
        <Select
          label="Role in this project"
          name="role"
          value={role}
          options={[
            { value: 'developer', label: 'Developer (reads and writes keys, allowlist, identity tokens)' },
            { value: 'viewer', label: 'Viewer (reads only)' },
          ]}
          onChange={(e) => setRole(e.currentTarget.value as Role)}
        />
      </div>
      <ErrorNote error={create.error} />
      <button type="submit" disabled={create.busy}>
        {create.busy ? 'Working…' : 'Create bot'}
      </button>
    </form>
  );
}

function BotKeys({ projectId, bot, writable }: { projectId: string; bot: Bot; writable: boolean }) {
  const [token, setToken] = useState<{ value: string; label: string }>();
  const [target, setTarget] = useState<BotKey>();
  const [revoked, setRevoked] = useState<string>();
  const list = usePaged(
    async (cursor) => {
      const page = await must(
        api.GET('/admin/v1/projects/{project_id}/bots/{bot_id}/keys', {
          params: { path: { project_id: projectId, bot_id: bot.id }, query: { cursor } },
        }),
      );
      return { items: page.bot_keys, next: page.next_cursor };
    },
    [bot.id],
  );
  const create = useAction(async () => {
    const r = await must(
      api.POST('/admin/v1/projects/{project_id}/bots/{bot_id}/keys', {
        params: { path: { project_id: projectId, bot_id: bot.id } },
      }),
    );
    setRevoked(undefined);
    setToken({ value: r.token, label: `${r.bot_key.display_prefix}…${r.bot_key.last_four}` });
    list.reload();
  });
  const revoke = useAction(async () => {
    if (!target) return;
    const k = await must(
      api.DELETE('/admin/v1/projects/{project_id}/bots/{bot_id}/keys/{key_id}', {
        params: { path: { project_id: projectId, bot_id: bot.id, key_id: target.id } },
      }),
    );
    setRevoked(`${k.display_prefix}…${k.last_four}`);
    setTarget(undefined);
    list.reload();
  });

  return (
    <section aria-labelledby="bot-keys">
      <h2 id="bot-keys">Keys of bot {bot.name}</h2>
      <p>
        A bot key is a token (<code>rpb_…</code>) sent as <code>Authorization: Bearer &lt;token&gt;</code>: it
        acts as the bot, within this project, with its role ({bot.role}).
      </p>
      {token && (
        <SecretOnce
          label={`Bot token ${token.label} of ${bot.name}`}
          value={token.value}
          onDismiss={() => setToken(undefined)}
        />
      )}
      {revoked && <Done>Bot key {revoked} revoked: it stopped authenticating at once.</Done>}
      <ErrorNote error={list.error} />
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title="This bot has no keys">
          {writable ? 'Create one to let a program act as this bot.' : 'An owner or admin can create one.'}
        </Empty>
      )}
      {list.items.length > 0 && (
        <Table
          caption={`Keys of bot ${bot.name}`}
          head={['Key', 'Created', 'Last used', 'Status', 'Actions']}
        >
          {list.items.map((k) => (
            <tr key={k.id}>
              <td>
                <code class="prj-nowrap">
                  {k.display_prefix}…{k.last_four}
                </code>
              </td>
              <td>
                <Time at={k.created_at} />
              </td>
              <td>
                <Time at={k.last_used_at} />
              </td>
              <td>
                {k.revoked_at ? (
                  <>
                    <Badge tone="bad">revoked</Badge> <Time at={k.revoked_at} />
                  </>
                ) : (
                  <Badge tone="ok">active</Badge>
                )}
              </td>
              <td>
                {writable && !k.revoked_at && (
                  <button
                    type="button"
                    class="danger small"
                    aria-label={`Revoke bot key ${k.display_prefix}…${k.last_four}`}
                    onClick={() => {
                      revoke.setError(undefined);
                      setTarget(k);
                    }}
                  >
                    Revoke
                  </button>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} />
      {writable && (
        <>
          <ErrorNote error={create.error} />
          <button type="button" disabled={create.busy} onClick={() => void create.run()}>
            {create.busy ? 'Working…' : `Create a key for ${bot.name}`}
          </button>
        </>
      )}
      <Confirm
        open={target !== undefined}
        title="Revoke this bot key?"
        confirmLabel="Revoke key"
        danger
        busy={revoke.busy}
        error={revoke.error}
        onConfirm={() => void revoke.run()}
        onCancel={() => setTarget(undefined)}
      >
        {target && (
          <p>
            The token{' '}
            <code>
              {target.display_prefix}…{target.last_four}
            </code>{' '}
            of bot <strong>{bot.name}</strong> stops authenticating at once; programs using it are refused.
            The bot and its other keys stay. This cannot be undone.
          </p>
        )}
      </Confirm>
    </section>
  );
}

export function Bots({ project }: TabProps) {
  const { session } = useSession();
  const { query, route } = useLocation();
  const writable = can(session, 'bots:write');
  const [created, setCreated] = useState<Bot>();
  const list = usePaged(async (cursor) => {
    const page = await must(
      api.GET('/admin/v1/projects/{project_id}/bots', {
        params: { path: { project_id: project.id }, query: { cursor } },
      }),
    );
    return { items: page.bots, next: page.next_cursor };
  });
  const selected = list.items.find((b) => b.id === query.bot);
  const open = (bot: Bot) => route(`${paths.project(project.id, 'bots')}?bot=${encodeURIComponent(bot.id)}`);

  return (
    <div>
      {created && <Done>Bot {created.name} created. Create a key for it below to use it.</Done>}
      <h2>Bots</h2>
      <p>
        Bots are machine identities of this project with a project role. Programs act as a bot with one of its
        keys, or with an <a href={paths.project(project.id, 'identity-tokens')}>identity token</a> of narrower
        scopes.
      </p>
      <ErrorNote error={list.error} />
      {list.loading && list.items.length === 0 && !list.error && <p class="muted">Loading bots…</p>}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title="No bots yet">
          {writable
            ? 'Create one below, then give it a key.'
            : 'An owner or admin of the tenant can create one.'}
        </Empty>
      )}
      {list.items.length > 0 && (
        <Table caption={`Bots of ${project.name}`} head={['Name', 'Role', 'Id', 'Created', 'Keys']}>
          {list.items.map((b) => (
            <tr key={b.id} class={b.id === selected?.id ? 'prj-selected-row' : undefined}>
              <td>{b.name}</td>
              <td>
                <Badge>{b.role}</Badge>
              </td>
              <td>
                <code>{b.id}</code>
              </td>
              <td>
                <Time at={b.created_at} />
              </td>
              <td>
                <button
                  type="button"
                  class="secondary small"
                  aria-label={`Keys of ${b.name}`}
                  aria-pressed={b.id === selected?.id}
                  onClick={() => open(b)}
                >
                  Keys
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} />
      {selected && <BotKeys key={selected.id} projectId={project.id} bot={selected} writable={writable} />}
      {writable && (
        <CreateBot
          projectId={project.id}
          onCreated={(bot) => {
            setCreated(bot);
            list.reload();
            open(bot);
          }}
        />
      )}
    </div>
  );
}
