/**
 * Account: your sessions (end one, or all but this one), the password change and the TOTP second
 * factor (account/second-factor.tsx).
 */
import { useState } from 'preact/hooks';
import { api, must, type paths } from '../api.ts';
import { useSession } from '../session.tsx';
import {
  Badge,
  Check,
  Confirm,
  closing,
  Done,
  Empty,
  ErrorNote,
  Field,
  More,
  Page,
  submitting,
  Table,
  Time,
  useAction,
  useLoad,
  usePaged,
} from '../ui/kit.tsx';
import { SecondFactor } from './account/second-factor.tsx';
import '../ui/account.css';

type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never;
type UserSession = Json<paths['/admin/v1/auth/sessions']['get']['responses'][200]>['sessions'][number];
type Ended = Json<paths['/admin/v1/auth/password']['post']['responses'][200]>;

const when = (at: string | null | undefined) => <Time at={at} />;

const SESSION_HEAD = ['Kind', 'Signed in', 'Last used', 'Expires', 'From', 'Actions'];

const PASSWORD_FIELDS = [
  { name: 'current', label: 'Current password', autoComplete: 'current-password' },
  { name: 'next', label: 'New password', autoComplete: 'new-password', hint: '12 to 256 characters.' },
  { name: 'again', label: 'New password again', autoComplete: 'new-password' },
] as const;

const KIND = { browser: 'Browser', bearer: 'API (bearer token)', cli: 'CLI token' } as const;

/** What a password change or "sign out everywhere else" ended, in words. */
function endedText(e: Ended): string {
  const n = (count: number, one: string, many: string) => `${count} ${count === 1 ? one : many}`;
  return (
    `Ended ${n(e.sessions, 'other session or CLI token', 'other sessions and CLI tokens')}, ` +
    `${n(e.device_grants, 'pending device approval', 'pending device approvals')} and ` +
    `${n(e.identity_tokens, 'identity token', 'identity tokens')}.`
  );
}

function Sessions() {
  const { signOut } = useSession();
  const list = usePaged<UserSession>(async (cursor) => {
    const body = await must(api.GET('/admin/v1/auth/sessions', { params: { query: { cursor } } }));
    return { items: body.sessions, next: body.next_cursor };
  });
  const [ending, setEnding] = useState<UserSession>();
  const [othersOpen, setOthersOpen] = useState(false);
  const [keepIdentity, setKeepIdentity] = useState(false);
  const [done, setDone] = useState<string>();
  const endButton = (s: UserSession) => ({
    'aria-label': s.current
      ? 'End this session (sign out)'
      : `End the session of ${new Date(s.created_at).toLocaleString()}`,
    onClick: () => setEnding(s),
  });

  const endOne = useAction(async () => {
    if (!ending) return;
    if (ending.current) return signOut();
    await must(api.DELETE('/admin/v1/auth/sessions/{id}', { params: { path: { id: ending.id } } }));
    setDone('Session ended: it must sign in again.');
    setEnding(undefined);
    list.reload();
  });
  const endOthers = useAction(async () => {
    const body = await must(
      api.POST('/admin/v1/auth/sessions/revoke-others', { body: { keep_identity_tokens: keepIdentity } }),
    );
    setDone(endedText(body));
    setOthersOpen(false);
    list.reload();
  });

  return (
    <section aria-labelledby="sessions-h">
      <h2 id="sessions-h">Sessions</h2>
      <p class="muted">Where you are signed in (browsers, API logins and CLI tokens), newest first.</p>
      <ErrorNote error={list.error} />
      {done && <Done>{done}</Done>}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title="No sessions">Sign in from a browser or run `relayplane login` to start one.</Empty>
      )}
      {list.items.length > 0 && (
        <Table caption="Your sessions" head={SESSION_HEAD}>
          {list.items.map((s) => (
            <tr key={s.id}>
              <td>
                {KIND[s.kind]} {s.current && <Badge tone="ok">This session</Badge>}
              </td>
              <td>{when(s.created_at)}</td>
              <td>{s.last_used_at ? when(s.last_used_at) : <span class="muted">Not since</span>}</td>
              <td>{when(s.expires_at)}</td>
              <td>
                <span class="mono">{s.ip ?? '—'}</span>
                {s.user_agent && <div class="muted ua">{s.user_agent}</div>}
              </td>
              <td>
                <button type="button" class="secondary small" {...endButton(s)}>
                  End
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} />
      <p>
        <button type="button" class="danger" onClick={() => setOthersOpen(true)}>
          Sign out everywhere else
        </button>
      </p>
      <Confirm
        open={ending !== undefined}
        title="End this session?"
        confirmLabel="End session"
        danger
        busy={endOne.busy}
        error={endOne.error}
        onConfirm={() => void endOne.run()}
        onCancel={closing(() => setEnding(undefined), endOne)}
      >
        {ending?.current && <p>This is the session you are using: ending it signs you out here.</p>}
        {ending && !ending.current && (
          <p>
            The session ({KIND[ending.kind]}) signed in on {when(ending.created_at)} from{' '}
            {ending.ip ?? 'an unknown address'} stops working on every gateway from its next request: whoever
            uses it must sign in again.
          </p>
        )}
      </Confirm>
      <Confirm
        open={othersOpen}
        title="Sign out everywhere else?"
        confirmLabel="Sign out everywhere else"
        danger
        busy={endOthers.busy}
        error={endOthers.error}
        onConfirm={() => void endOthers.run()}
        onCancel={closing(() => setOthersOpen(false), endOthers)}
      >
        <p>
          Every other session and CLI token of yours ends at once, device approvals not yet redeemed are
          refused and logins in progress fail. Unless you keep them, the identity tokens rooted at you are
          revoked too, except those created under this session. This session stays signed in.
        </p>
        <Check label="Keep my identity tokens" checked={keepIdentity} onChange={setKeepIdentity} />
      </Confirm>
    </section>
  );
}

function PasswordChange({ mfa, onChanged }: { mfa: boolean; onChanged: () => void }) {
  const { session } = useSession();
  const blank = { current: '', next: '', again: '', code: '' };
  const [pw, setPw] = useState(blank);
  const bind = (key: keyof typeof blank) => ({
    value: pw[key],
    onInput: (e: { currentTarget: HTMLInputElement }) => setPw({ ...pw, [key]: e.currentTarget.value }),
  });
  const [keepIdentity, setKeepIdentity] = useState(false);
  const [done, setDone] = useState<string>();
  const change = useAction(async () => {
    setDone(undefined);
    if (pw.next !== pw.again)
      throw new Error('The new password and its confirmation differ: type the same password twice.');
    const body = await must(
      api.POST('/admin/v1/auth/password', {
        body: {
          current_password: pw.current,
          new_password: pw.next,
          keep_identity_tokens: keepIdentity,
          ...(mfa ? { mfa_code: pw.code.trim() } : {}),
        },
      }),
    );
    setPw(blank);
    setDone(`Password changed. ${endedText(body)}`);
    onChanged();
  });
  return (
    <section aria-labelledby="password-h">
      <h2 id="password-h">Password</h2>
      <form class="card narrow-form" onSubmit={submitting(change.run)}>
        <p class="muted">
          Changing your password signs out every other session and CLI token, refuses device approvals not yet
          redeemed and, unless you keep them, revokes the identity tokens rooted at you (except those created
          under this session). This session stays signed in.
        </p>
        <input type="text" name="username" autoComplete="username" value={session.user.email} hidden />
        {PASSWORD_FIELDS.map((f) => (
          <Field key={f.name} type="password" required {...f} {...bind(f.name)} />
        ))}
        {mfa && (
          <Field
            label="Second-factor code"
            hint="The current code from your authenticator app."
            autoComplete="one-time-code"
            inputMode="numeric"
            required
            {...bind('code')}
          />
        )}
        <Check label="Keep my identity tokens" checked={keepIdentity} onChange={setKeepIdentity} />
        <ErrorNote error={change.error} />
        {done && <Done>{done}</Done>}
        <button type="submit" disabled={change.busy}>
          {change.busy ? 'Working…' : 'Change password'}
        </button>
      </form>
    </section>
  );
}

export function Account() {
  const mfa = useLoad(() => must(api.GET('/admin/v1/auth/mfa')));
  const [sessionsKey, setSessionsKey] = useState(0);
  return (
    <Page title="Account">
      <Sessions key={sessionsKey} />
      <PasswordChange mfa={mfa.data?.totp_enabled ?? false} onChanged={() => setSessionsKey((k) => k + 1)} />
      <ErrorNote error={mfa.error} />
      {mfa.data && <SecondFactor status={mfa.data} reload={mfa.reload} />}
    </Page>
  );
}
