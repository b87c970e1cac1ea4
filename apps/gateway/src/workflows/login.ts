/**
 * A password login that may need a second factor, in one form post (the device-verification
 * page's login: password and, when the account has one, the authenticator code together). Two
 * calls to admin: Login, then LoginMfa with its challenge when admin asks for the second step.
 */
import type { Session } from '@relayplane/proto/admin';
import type { AdminClient } from '../clients.ts';

export type FormLogin =
  | { signedIn: true; token: string; session: Session | undefined; deviceToken: string }
  /** The account has a second factor and the form carried no code: ask for it. */
  | { signedIn: false };

export async function loginWithOptionalCode(
  admin: AdminClient,
  input: { email: string; password: string; code: string; clientIp: string; deviceToken: string },
): Promise<FormLogin> {
  const { email, password, clientIp, deviceToken } = input;
  const first = await admin.login({ email, password, clientIp, deviceToken });
  if (!first.mfaRequired) return signedIn(first);
  if (input.code.trim() === '') return { signedIn: false };
  const second = await admin.loginMfa({ mfaToken: first.mfaToken, code: input.code, clientIp, deviceToken });
  return signedIn(second);
}

function signedIn(res: { token: string; session?: Session; deviceToken: string }): FormLogin {
  return { signedIn: true, token: res.token, session: res.session, deviceToken: res.deviceToken };
}
