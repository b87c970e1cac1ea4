/**
 * The device-flow approval page (RFC 8628): `relayplane login` prints this page's URL
 * (`verification_uri`, with `?user_code=` in `verification_uri_complete`). A signed-in user
 * checks the code against the one the CLI shows and approves or denies it
 * (POST /admin/v1/auth/device/approve). With TOTP on, approving asks for a current code.
 * The server-rendered `/device` page does the same without JavaScript.
 */
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { ApiError, api, must } from '../api.ts';
import { Done, ErrorNote, Field, Page } from '../ui/kit.tsx';

const CODE = /^[A-Z]{4}-?[A-Z]{4}$/;

export function Activate() {
  const { query } = useLocation();
  const [userCode, setUserCode] = useState((query.user_code ?? '').toUpperCase());
  const [mfaCode, setMfaCode] = useState('');
  const [needsMfa, setNeedsMfa] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [outcome, setOutcome] = useState<{ status: 'approved' | 'denied'; client: string }>();

  const decide = async (action: 'approve' | 'deny') => {
    setBusy(true);
    setError(undefined);
    try {
      const code = userCode.trim().toUpperCase();
      if (!CODE.test(code))
        throw new ApiError(400, 'Enter the code the CLI shows: eight letters, like WDJB-MJHT.');
      const body = { user_code: code, action, ...(needsMfa && mfaCode ? { mfa_code: mfaCode.trim() } : {}) };
      const res = await must(api.POST('/admin/v1/auth/device/approve', { body }));
      setOutcome({ status: res.status, client: res.client_id });
    } catch (e) {
      if (e instanceof ApiError && e.status === 403 && /second.factor|mfa/i.test(e.message))
        setNeedsMfa(true);
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  if (outcome) {
    return (
      <Page title="Device login">
        <Done>
          {outcome.status === 'approved'
            ? `Approved: ${outcome.client} is now signed in. You can close this page and return to the terminal.`
            : `Denied: ${outcome.client} was not signed in.`}
        </Done>
      </Page>
    );
  }
  return (
    <Page title="Device login">
      <form
        class="card"
        onSubmit={(e) => {
          e.preventDefault();
          void decide('approve');
        }}
      >
        <p>
          A command-line client asks to act as you. Approve only if you started <code>relayplane login</code>{' '}
          and the code below is the one it shows.
        </p>
        <Field
          label="Code shown by the CLI"
          name="user_code"
          class="mono code-input"
          autoComplete="off"
          autoCapitalize="characters"
          required
          value={userCode}
          onInput={(e) => setUserCode(e.currentTarget.value.toUpperCase())}
        />
        {needsMfa && (
          <Field
            label="Authenticator code"
            name="mfa_code"
            autoComplete="one-time-code"
            required
            value={mfaCode}
            onInput={(e) => setMfaCode(e.currentTarget.value)}
          />
        )}
        <ErrorNote error={error} />
        <div class="actions">
          <button type="submit" disabled={busy}>
            Approve
          </button>
          <button type="button" class="secondary" disabled={busy} onClick={() => void decide('deny')}>
            Deny
          </button>
        </div>
      </form>
    </Page>
  );
}
