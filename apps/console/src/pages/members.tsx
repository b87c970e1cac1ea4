/**
 * Members and roles of the active tenant: the list (paged), adding a registered user by email with
 * a role, changing a role and removing a member (confirmed). The API decides who may do what (only
 * owners touch owners; the last owner stays): its refusal text is shown as it came.
 */
import { useState } from 'preact/hooks';
import { api, type components, must } from '../api.ts';
import { can, useSession } from '../session.tsx';
import {
  Badge,
  Busy,
  Confirm,
  Done,
  Empty,
  ErrorNote,
  Field,
  More,
  Page,
  Select,
  Table,
  Time,
  useAction,
  usePaged,
} from '../ui/kit.tsx';
import '../ui/overview.css';

type Member = components['schemas']['Member'];
type Role = Member['role'];

const ROLES: Array<{ value: Role; label: string }> = [
  { value: 'owner', label: 'Owner' },
  { value: 'admin', label: 'Admin' },
  { value: 'developer', label: 'Developer' },
  { value: 'viewer', label: 'Viewer' },
];
const ROLE_LABEL = Object.fromEntries(ROLES.map((r) => [r.value, r.label])) as Record<Role, string>;

function AddMember({ onAdded }: { onAdded: (m: Member) => void }) {
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('developer');
  const add = useAction(async () => {
    const member = await must(api.POST('/admin/v1/members', { body: { email: email.trim(), role } }));
    setEmail('');
    onAdded(member);
  });
  return (
    <form
      class="card ov-card"
      aria-labelledby="add-member"
      onSubmit={(e) => {
        e.preventDefault();
        void add.run();
      }}
    >
      <h2 id="add-member">Add a member</h2>
      <p class="muted">
        The person needs a Relayplane account already: no invitation is sent. Only owners may add an owner.
      </p>
      <div class="ov-filters">
        <Field
          label="Email"
          type="email"
          required
          minLength={3}
          maxLength={254}
          autoComplete="off"
          value={email}
          onInput={(e) => setEmail(e.currentTarget.value)}
        />
        <Select
          label="Role"
          value={role}
          options={ROLES}
          onChange={(e) => setRole(e.currentTarget.value as Role)}
        />
        <div class="actions">
          <button type="submit" disabled={add.busy}>
            {add.busy ? 'Working…' : 'Add member'}
          </button>
        </div>
      </div>
      <ErrorNote error={add.error} />
    </form>
  );
}

function RoleCell({
  member,
  editable,
  onChanged,
}: {
  member: Member;
  editable: boolean;
  onChanged: (m: Member) => void;
}) {
  const [role, setRole] = useState<Role>(member.role);
  const change = useAction(async () => {
    const updated = await must(
      api.PATCH('/admin/v1/members/{user_id}', {
        params: { path: { user_id: member.user.id } },
        body: { role },
      }),
    );
    onChanged(updated);
  });
  if (!editable)
    return <Badge tone={member.role === 'owner' ? 'ok' : 'info'}>{ROLE_LABEL[member.role]}</Badge>;
  return (
    <>
      <form
        class="ov-inline"
        onSubmit={(e) => {
          e.preventDefault();
          void change.run();
        }}
      >
        <select
          aria-label={`Role of ${member.user.email}`}
          value={role}
          onChange={(e) => setRole(e.currentTarget.value as Role)}
        >
          {ROLES.map((r) => (
            <option key={r.value} value={r.value}>
              {r.label}
            </option>
          ))}
        </select>
        <button
          type="submit"
          class="secondary small"
          disabled={role === member.role || change.busy}
          aria-label={`Change the role of ${member.user.email}`}
        >
          {change.busy ? 'Working…' : 'Change'}
        </button>
      </form>
      <ErrorNote error={change.error} />
    </>
  );
}

export function Members() {
  const { session, refresh } = useSession();
  const writable = can(session, 'members:write');
  const list = usePaged(async (cursor) => {
    const body = await must(api.GET('/admin/v1/members', { params: { query: cursor ? { cursor } : {} } }));
    return { items: body.members, next: body.next_cursor };
  });
  const [notice, setNotice] = useState<string>();
  const [removing, setRemoving] = useState<Member>();
  const [overrides, setOverrides] = useState<Record<string, Member | null>>({});
  const remove = useAction(async () => {
    if (!removing) return;
    const self = removing.user.id === session.user.id;
    await must(
      api.DELETE('/admin/v1/members/{user_id}', { params: { path: { user_id: removing.user.id } } }),
    );
    setOverrides((o) => ({ ...o, [removing.user.id]: null }));
    setNotice(`${removing.user.email} was removed from ${session.tenant.name}.`);
    setRemoving(undefined);
    if (self) await refresh();
  });
  const members = list.items
    .map((m) => (m.user.id in overrides ? overrides[m.user.id] : m))
    .filter((m): m is Member => m !== null && m !== undefined);

  return (
    <Page title="Members">
      <p>
        Who can use the tenant <strong>{session.tenant.name}</strong>, and with which role. Owners and admins
        manage members; only owners may grant the owner role or change an owner, and the last owner cannot
        leave.
      </p>
      {notice && <Done>{notice}</Done>}
      {writable && (
        <AddMember
          onAdded={(m) => {
            setNotice(`${m.user.email} was added as ${ROLE_LABEL[m.role].toLowerCase()}.`);
            setOverrides({});
            list.reload();
          }}
        />
      )}
      <h2>Members of {session.tenant.name}</h2>
      <ErrorNote error={list.error} />
      {list.loading && list.items.length === 0 && <Busy label="Loading members…" />}
      {!list.loading && !list.error && members.length === 0 && (
        <Empty title="No members to show.">Add a member above by their account's email.</Empty>
      )}
      {members.length > 0 && (
        <Table
          caption={`Members of ${session.tenant.name}`}
          head={writable ? ['Member', 'Role', 'Actions'] : ['Member', 'Role']}
        >
          {members.map((m) => {
            const self = m.user.id === session.user.id;
            return (
              <tr key={m.user.id}>
                <td class="ov-member">
                  {m.user.email}
                  {self && <span class="muted"> (you)</span>}
                  <span class="muted ov-id">
                    joined <Time at={m.created_at} />
                  </span>
                </td>
                <td>
                  <RoleCell
                    key={`${m.user.id}:${m.role}`}
                    member={m}
                    editable={writable}
                    onChanged={(updated) => {
                      setOverrides((o) => ({ ...o, [updated.user.id]: updated }));
                      setNotice(`${updated.user.email} is now ${ROLE_LABEL[updated.role].toLowerCase()}.`);
                      if (self) void refresh();
                    }}
                  />
                </td>
                {writable && (
                  <td>
                    <button
                      type="button"
                      class="secondary small"
                      aria-label={`Remove ${m.user.email}`}
                      onClick={() => {
                        remove.setError(undefined);
                        setRemoving(m);
                      }}
                    >
                      Remove
                    </button>
                  </td>
                )}
              </tr>
            );
          })}
        </Table>
      )}
      <More list={list} label="Load more members" />
      <Confirm
        open={removing !== undefined}
        title={removing ? `Remove ${removing.user.email}?` : 'Remove member?'}
        confirmLabel="Remove member"
        danger
        busy={remove.busy}
        error={remove.error}
        onConfirm={() => void remove.run()}
        onCancel={() => setRemoving(undefined)}
      >
        {removing && (
          <p>
            {removing.user.id === session.user.id ? 'You' : removing.user.email} will lose access to{' '}
            <strong>{session.tenant.name}</strong> at once:{' '}
            {removing.user.id === session.user.id ? 'your' : 'their'} sessions in this tenant stop working.
            The account itself stays, and can be added again later.
          </p>
        )}
      </Confirm>
    </Page>
  );
}
