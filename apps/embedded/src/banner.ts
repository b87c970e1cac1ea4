import type { EmbeddedInfo } from './embedded.ts';

/**
 * What a newcomer needs after `pnpm start`: where things are and how to issue a first call.
 * A generated password is printed only to a terminal (`showSecrets`); otherwise — output that
 * may end up in a log — the banner names the 0600 file that holds it.
 */
export function banner(
  info: EmbeddedInfo,
  options: { showSecrets: boolean; consoleProblem?: string | undefined },
): string {
  const lines = [
    '',
    'Relayplane is running (embedded mode: all four services in this process, PGlite storage).',
    '',
    `  Console        ${info.url}/${options.consoleProblem ? `   (not built: ${options.consoleProblem})` : ''}`,
    `  API            ${info.url}`,
    `  API reference  ${info.url}/docs`,
    `  OpenAPI        ${info.url}/openapi.json`,
    `  JWKS           ${info.url}/v1/credentials/jwks`,
    `  Health         ${info.url}/healthz   ${info.url}/readyz`,
    `  Data           ${info.dataDir}`,
    '',
  ];
  if (info.kekGenerated) {
    lines.push(
      '  WARNING: generated a key-encryption key for signing keys in the data directory.',
      '           Fine for development; in production set RELAYPLANE_KEK (base64, 32 bytes) from a secret store.',
      '',
    );
  }
  if (info.billing.provider === 'builtin') {
    lines.push(
      ...(info.billing.paidCheckout
        ? [
            '  WARNING: BILLING_BUILTIN_PAID_CHECKOUT is on: the built-in checkout confirms paid plans without payment,',
            '           so anyone who can sign up can move their tenant to any plan. Fine for a demo only.',
          ]
        : [
            '  Billing: built-in provider (takes no payment), paid checkout off: checking out a paid plan answers 422.',
            '           A platform admin sets any plan: PUT /admin/v1/tenants/{tenant_id}/plan.',
            '           For a demo of paid checkout: BILLING_BUILTIN_PAID_CHECKOUT=true pnpm start',
          ]),
      '',
    );
  }
  const login = info.generatedLogin;
  if (login) {
    lines.push(
      '  First owner (platform admin) — generated on this first start:',
      `    email          ${login.email}`,
      ...(options.showSecrets ? [`    password       ${login.password}   (shown only this once)`] : []),
      `    password file  ${login.passwordFile}   (mode 0600; delete it once you have stored the password)`,
      '',
    );
  } else if (info.bootstrapEmail) {
    lines.push(
      `  First owner created: ${info.bootstrapEmail} (password from RELAYPLANE_BOOTSTRAP_PASSWORD)`,
      '',
    );
  }
  const email = login?.email ?? info.bootstrapEmail ?? '<email>';
  // The curl line reads the password file rather than repeating the password.
  const password = login ? `'"$(cat "${login.passwordFile}")"'` : '<password>';
  const json = `-H 'content-type: application/json'`;
  lines.push(
    '  Issue a relay credential with curl:',
    `    TOKEN=$(curl -s ${info.url}/admin/v1/auth/login ${json} \\`,
    `      -d '{"email":"${email}","password":"${password}"}' | sed -E 's/.*"token":"([^"]+)".*/\\1/')`,
    `    PROJECT=$(curl -s ${info.url}/admin/v1/projects -H "authorization: Bearer $TOKEN" ${json} \\`,
    `      -d '{"name":"demo"}' | sed -E 's/.*"id":"(prj_[^"]+)".*/\\1/')`,
    `    KEY=$(curl -s ${info.url}/admin/v1/projects/$PROJECT/api-keys -H "authorization: Bearer $TOKEN" ${json} \\`,
    `      -d '{}' | sed -E 's/.*"key":"([^"]+)".*/\\1/')`,
    `    curl -s ${info.url}/api/v1/credentials -H "x-api-key: $KEY" ${json} -d '{"ttl_seconds":600}'`,
    '',
    '  The embedded mode ships demo relays on 127.0.0.1 (set RELAYPLANE_RELAYS_FILE for real ones).',
    '',
  );
  return lines.join('\n');
}
