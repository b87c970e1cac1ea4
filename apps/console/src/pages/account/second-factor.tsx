/**
 * The account page's TOTP second factor: enrol with a QR code, recovery codes shown once, new
 * recovery codes, removal. Secrets (the pending TOTP secret, the recovery codes) live only in
 * this component's state: leaving the page drops them.
 */
import { useState } from 'preact/hooks';
import { api, must, type paths } from '../../api.ts';
import {
  Badge,
  Confirm,
  closing,
  Done,
  ErrorNote,
  Field,
  submitting,
  Time,
  useAction,
} from '../../ui/kit.tsx';
import { QrCode } from '../../ui/qr.tsx';

type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never;
type MfaStatus = Json<paths['/admin/v1/auth/mfa']['get']['responses'][200]>;

const when = (at: string | null | undefined) => <Time at={at} />;

/** Copies `text`; on a refused clipboard, selects the element with id `fallback` instead. */
function CopyButton({ text, label, fallback }: { text: string; label: string; fallback: string }) {
  const [copied, setCopied] = useState(false);
  const copy = () =>
    navigator.clipboard.writeText(text).then(
      () => setCopied(true),
      () => getSelection()?.selectAllChildren(document.getElementById(fallback) ?? document.body),
    );
  return (
    <button type="button" class="secondary small" onClick={() => void copy()}>
      {copied ? 'Copied' : label}
    </button>
  );
}

/** The ten recovery codes, shown once (like SecretOnce): a copy-all button, gone on Done or navigation. */
function RecoveryCodes({ codes, onDismiss }: { codes: string[]; onDismiss: () => void }) {
  return (
    <section class="secret" aria-labelledby="recovery-h">
      <h3 id="recovery-h">Your recovery codes</h3>
      <p>
        <strong>Shown once.</strong> Store them somewhere safe now: each one replaces a code from your app
        once, if you lose it. They cannot be shown again.
      </p>
      <ol class="codes" id="recovery-codes" data-testid="recovery-codes">
        {codes.map((c) => (
          <li key={c}>{c}</li>
        ))}
      </ol>
      <div class="actions">
        <CopyButton text={codes.join('\n')} label="Copy all" fallback="recovery-codes" />
        <button type="button" class="secondary small" onClick={onDismiss}>
          I have saved them
        </button>
      </div>
    </section>
  );
}

type Pending = { secret: string; uri: string };
type EnrolProps = { pending: Pending; onConfirmed: (codes: string[]) => void; onCancel: () => void };

function Enrolment({ pending: { secret, uri }, onConfirmed, onCancel }: EnrolProps) {
  const [code, setCode] = useState('');
  const confirm = useAction(async () => {
    const body = await must(api.POST('/admin/v1/auth/mfa/totp/confirm', { body: { code: code.trim() } }));
    onConfirmed(body.recovery_codes);
  });
  return (
    <div class="card enrol">
      <QrCode value={uri} label="QR code for your authenticator app" />
      <div>
        <ol>
          <li>Scan the QR code with your authenticator app.</li>
          <li>
            Or type this key into it (time-based, 6 digits):{' '}
            <code id="totp-secret" class="totp-secret" data-testid="totp-secret">
              {secret}
            </code>{' '}
            <CopyButton text={secret} label="Copy key" fallback="totp-secret" />
          </li>
          <li>Enter the code the app shows.</li>
        </ol>
        <form onSubmit={submitting(confirm.run)}>
          <Field
            label="Code from your authenticator app"
            autoComplete="one-time-code"
            inputMode="numeric"
            required
            value={code}
            onInput={(e) => setCode(e.currentTarget.value)}
          />
          <ErrorNote error={confirm.error} />
          <div class="actions">
            <button type="submit" disabled={confirm.busy}>
              {confirm.busy ? 'Working…' : 'Turn on'}
            </button>
            <button type="button" class="secondary" onClick={onCancel}>
              Cancel
            </button>
          </div>
        </form>
      </div>
    </div>
  );
}

export function SecondFactor({ status, reload }: { status: MfaStatus; reload: () => void }) {
  const [pending, setPending] = useState<Pending>();
  const [codes, setCodes] = useState<string[]>();
  const [removing, setRemoving] = useState(false);
  const [renewing, setRenewing] = useState(false);
  const [renewCode, setRenewCode] = useState('');
  const [proof, setProof] = useState({ code: '', password: '' });
  const [done, setDone] = useState<string>();
  const start = useAction(async () => {
    setDone(undefined);
    const body = await must(api.POST('/admin/v1/auth/mfa/totp'));
    setPending({ secret: body.secret, uri: body.otpauth_uri });
  });
  const remove = useAction(async () => {
    const code = proof.code.trim();
    const body = code ? { code } : proof.password ? { password: proof.password } : {};
    await must(api.DELETE('/admin/v1/auth/mfa/totp', { body }));
    setRemoving(false);
    setProof({ code: '', password: '' });
    setDone('The second factor is off: signing in needs only your password.');
    reload();
  });
  const renew = useAction(async () => {
    setDone(undefined);
    const body = await must(
      api.POST('/admin/v1/auth/mfa/recovery-codes', { body: { code: renewCode.trim() } }),
    );
    setRenewing(false);
    setRenewCode('');
    setCodes(body.recovery_codes);
    reload();
  });
  return (
    <section aria-labelledby="mfa-h">
      <h2 id="mfa-h">Second factor</h2>
      {codes && <RecoveryCodes codes={codes} onDismiss={() => setCodes(undefined)} />}
      {done && <Done>{done}</Done>}
      {status.tenant_requires_mfa && !status.totp_enabled && (
        <p class="notice error">
          This tenant requires a second factor: until you set one up, the API refuses everything but your
          sessions and this enrolment.
        </p>
      )}
      {status.totp_enabled ? (
        <div class="card">
          <p>
            <Badge tone="ok">On</Badge> An authenticator app (TOTP) is asked for at sign-in, set up{' '}
            {when(status.confirmed_at)}.
          </p>
          <p>
            Recovery codes left:{' '}
            <strong class={status.recovery_codes_left <= 3 ? 'error' : ''}>
              {status.recovery_codes_left}
            </strong>
            {status.recovery_codes_left <= 3 && ' — get ten new ones below.'}
          </p>
          <div class="actions">
            <button type="button" class="secondary" onClick={() => setRenewing(true)}>
              New recovery codes
            </button>
            <button type="button" class="danger" onClick={() => setRemoving(true)}>
              Turn off
            </button>
          </div>
        </div>
      ) : pending ? (
        <Enrolment
          pending={pending}
          onCancel={() => setPending(undefined)}
          onConfirmed={(c) => {
            setPending(undefined);
            setCodes(c);
            reload();
          }}
        />
      ) : (
        <div class="card">
          <p>Off. With an authenticator app, signing in also asks for a code from your phone.</p>
          <ErrorNote error={start.error} />
          <button type="button" disabled={start.busy} onClick={() => void start.run()}>
            {start.busy ? 'Working…' : 'Set up an authenticator app'}
          </button>
        </div>
      )}
      <Confirm
        open={removing}
        title="Turn off the second factor?"
        confirmLabel="Turn off"
        danger
        busy={remove.busy}
        error={remove.error}
        onConfirm={() => void remove.run()}
        onCancel={closing(() => setRemoving(false), remove)}
      >
        <p>
          Your authenticator secret and every recovery code are deleted; signing in then needs only your
          password.
          {status.tenant_requires_mfa &&
            ' This tenant requires a second factor, so you will have to set one up again.'}{' '}
          Prove it is you with a current code, a recovery code or your password.
        </p>
        <Field
          label="Code or recovery code"
          autoComplete="one-time-code"
          value={proof.code}
          onInput={(e) => setProof({ ...proof, code: e.currentTarget.value })}
        />
        <Field
          label="Or your password"
          type="password"
          autoComplete="current-password"
          value={proof.password}
          onInput={(e) => setProof({ ...proof, password: e.currentTarget.value })}
        />
      </Confirm>
      <Confirm
        open={renewing}
        title="Get new recovery codes?"
        confirmLabel="Get new codes"
        busy={renew.busy}
        error={renew.error}
        onConfirm={() => void renew.run()}
        onCancel={closing(() => {
          setRenewing(false);
          setRenewCode('');
        }, renew)}
      >
        <p>
          Ten new recovery codes replace all of yours: the ones you have, used or not, stop working. Prove it
          is you with a current code from your app, or a recovery code.
        </p>
        <Field
          label="Code or recovery code"
          autoComplete="one-time-code"
          required
          value={renewCode}
          onInput={(e) => setRenewCode(e.currentTarget.value)}
        />
      </Confirm>
    </section>
  );
}
