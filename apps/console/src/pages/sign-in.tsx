/**
 * Sign in: email and password (POST /admin/v1/auth/login), then, for a user with TOTP, the
 * second step with a code from the authenticator or a recovery code (POST …/login/mfa). The
 * API sets the session cookie; the token it also answers is dropped here, never stored.
 */
import { useState } from 'preact/hooks';
import { ApiError, api, must, setCsrfToken } from '../api.ts';
import { ErrorNote, Field, Page } from '../ui/kit.tsx';

export function SignIn({ onSignedIn }: { onSignedIn: () => Promise<void> }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [mfaToken, setMfaToken] = useState<string>();
  const [code, setCode] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();

  const finish = async (csrf: string) => {
    setCsrfToken(csrf);
    setPassword('');
    setCode('');
    await onSignedIn();
  };

  const login = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const {
        data,
        error: refusal,
        response,
      } = await api.POST('/admin/v1/auth/login', { body: { email, password } });
      const body = refusal as { error?: string; mfa_required?: boolean; mfa_token?: string } | undefined;
      if (response.status === 401 && body?.mfa_required && body.mfa_token) {
        setMfaToken(body.mfa_token);
        setPassword('');
        return;
      }
      if (!data)
        throw new ApiError(
          response.status,
          body?.error ?? `${response.status} error`,
          response.headers.get('retry-after'),
        );
      await finish(data.csrf_token);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const second = async (e: Event) => {
    e.preventDefault();
    if (!mfaToken) return;
    setBusy(true);
    setError(undefined);
    try {
      const data = await must(
        api.POST('/admin/v1/auth/login/mfa', { body: { mfa_token: mfaToken, code: code.trim() } }),
      );
      await finish(data.csrf_token);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  if (mfaToken) {
    return (
      <Page title="Second factor">
        <form class="card" onSubmit={second}>
          <p>Enter the 6-digit code from your authenticator app, or one of your recovery codes.</p>
          <Field
            label="Code"
            name="code"
            autoComplete="one-time-code"
            inputMode="text"
            required
            autoFocus
            value={code}
            onInput={(ev) => setCode(ev.currentTarget.value)}
          />
          <ErrorNote error={error} />
          <div class="actions">
            <button type="submit" disabled={busy}>
              {busy ? 'Checking…' : 'Verify'}
            </button>
            <button
              type="button"
              class="secondary"
              onClick={() => {
                setMfaToken(undefined);
                setError(undefined);
              }}
            >
              Start over
            </button>
          </div>
        </form>
      </Page>
    );
  }
  return (
    <Page title="Sign in to Relayplane">
      <form class="card" onSubmit={login}>
        <Field
          label="Email"
          name="email"
          type="email"
          autoComplete="username"
          required
          autoFocus
          value={email}
          onInput={(ev) => setEmail(ev.currentTarget.value)}
        />
        <Field
          label="Password"
          name="password"
          type="password"
          autoComplete="current-password"
          required
          value={password}
          onInput={(ev) => setPassword(ev.currentTarget.value)}
        />
        <ErrorNote error={error} />
        <div class="actions">
          <button type="submit" disabled={busy}>
            {busy ? 'Signing in…' : 'Sign in'}
          </button>
        </div>
      </form>
      <p class="muted">
        The API reference is at <a href="/docs">/docs</a>.
      </p>
    </Page>
  );
}
