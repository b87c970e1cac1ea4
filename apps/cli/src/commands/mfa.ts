/**
 * mfa status, mfa enroll [--code], mfa recovery-codes --code, mfa disable (--code |
 * --password-stdin): the logged-in user's
 * TOTP second factor (docs/iam.md, "Second factor"). `enroll` without --code starts: it prints
 * the otpauth:// URI and, on a terminal, a QR code to scan; `enroll --code` confirms with the
 * app's first code and prints the ten recovery codes, once.
 */
import QRCode from 'qrcode';
import type { MfaStatus, RecoveryCodes, TotpConfirmation, TotpEnrollment } from '../api-types.ts';
import type { CommandSpec } from '../command.ts';
import { UsageError } from '../errors.ts';
import { renderFields, safe } from '../output.ts';
import { stringValue } from '../parse.ts';

const status: CommandSpec = {
  path: ['mfa', 'status'],
  summary: 'Show whether your account has a second factor',
  async run(ctx) {
    const { body } = await ctx.api.request<MfaStatus>('GET', '/admin/v1/auth/mfa', { auth: ctx.bearer() });
    ctx.print(body, () =>
      renderFields([
        ['TOTP', body.totp_enabled ? `enabled since ${body.confirmed_at ?? '?'}` : 'not enrolled'],
        ['Recovery codes left', String(body.recovery_codes_left)],
        ['Tenant requires MFA', body.tenant_requires_mfa ? 'yes' : 'no'],
      ]),
    );
  },
};

const enroll: CommandSpec = {
  path: ['mfa', 'enroll'],
  summary: 'Enrol a TOTP second factor (authenticator app)',
  description:
    'Without --code: starts, and prints the otpauth:// URI (and a QR code on a terminal) to add to an\n' +
    'authenticator app. Then run it again with --code and the 6 digits the app shows: that confirms it\n' +
    'and prints ten single-use recovery codes, shown only once. Keep them somewhere safe.',
  options: { code: { type: 'string', value: '123456', description: "the app's current code, to confirm" } },
  examples: ['relayplane mfa enroll', 'relayplane mfa enroll --code 123456'],
  async run(ctx, { values }) {
    const code = stringValue(values, 'code');
    if (code === undefined) {
      const { body } = await ctx.api.request<TotpEnrollment>('POST', '/admin/v1/auth/mfa/totp', {
        auth: ctx.bearer(),
      });
      const qr =
        ctx.json || !ctx.io.stdout.isTTY
          ? ''
          : await QRCode.toString(body.otpauth_uri, { type: 'terminal', small: true });
      ctx.print(
        body,
        () =>
          `${qr}\nAdd this to your authenticator app (scan the QR code, or open the URI):\n\n  ${safe(body.otpauth_uri)}\n\n` +
          `or type the secret: ${safe(body.secret)}\n\n` +
          'Then confirm with the code it shows:  relayplane mfa enroll --code <6 digits>\n',
      );
      return;
    }
    if (!/^\d{6}$/.test(code)) throw new UsageError('--code must be the 6 digits the app shows', this.path);
    const { body } = await ctx.api.request<TotpConfirmation>('POST', '/admin/v1/auth/mfa/totp/confirm', {
      auth: ctx.bearer(),
      json: { code },
    });
    ctx.print(
      body,
      () =>
        'Second factor enabled. Recovery codes (each works once, shown only now):\n\n' +
        body.recovery_codes.map((c) => `  ${safe(c)}\n`).join('') +
        '\n',
    );
  },
};

const recoveryCodes: CommandSpec = {
  path: ['mfa', 'recovery-codes'],
  summary: 'Get ten new recovery codes (every earlier one stops working)',
  description:
    'Proof beyond the saved token: --code with a current code or an unused recovery code. Prints ten\n' +
    'new single-use recovery codes, shown only once; the earlier ones, used or not, stop working.',
  options: { code: { type: 'string', value: 'code', description: 'a current code or a recovery code' } },
  examples: ['relayplane mfa recovery-codes --code 123456'],
  async run(ctx, { values }) {
    const code = stringValue(values, 'code');
    if (code === undefined) throw new UsageError('--code is required', this.path);
    const { body } = await ctx.api.request<RecoveryCodes>('POST', '/admin/v1/auth/mfa/recovery-codes', {
      auth: ctx.bearer(),
      json: { code },
    });
    ctx.print(
      body,
      () =>
        'New recovery codes (each works once, shown only now; the earlier ones no longer work):\n\n' +
        body.recovery_codes.map((c) => `  ${safe(c)}\n`).join('') +
        '\n',
    );
  },
};

const disable: CommandSpec = {
  path: ['mfa', 'disable'],
  summary: 'Remove your TOTP second factor (needs a code or the password)',
  description:
    'Proof beyond the saved token: --code with a current code or an unused recovery code, or\n' +
    '--password-stdin to read the password from stdin.',
  options: {
    code: { type: 'string', value: 'code', description: 'a current code or a recovery code' },
    'password-stdin': { type: 'boolean', description: 'read the password from stdin' },
  },
  examples: [
    'relayplane mfa disable --code 123456',
    'printf %s "$PASSWORD" | relayplane mfa disable --password-stdin',
  ],
  async run(ctx, { values }) {
    const code = stringValue(values, 'code');
    const fromStdin = values['password-stdin'] === true;
    if ((code === undefined) === !fromStdin) {
      throw new UsageError('give exactly one of --code and --password-stdin', this.path);
    }
    const json =
      code !== undefined ? { code } : { password: (await ctx.io.readStdin()).replace(/\r?\n$/, '') };
    await ctx.api.request('DELETE', '/admin/v1/auth/mfa/totp', { auth: ctx.bearer(), json });
    if (!ctx.json) ctx.out('Second factor removed.\n');
  },
};

export const MFA_COMMANDS: readonly CommandSpec[] = [status, enroll, recoveryCodes, disable];
