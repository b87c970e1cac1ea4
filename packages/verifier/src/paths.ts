import { authorizePath as authorize, type PathAuthorization } from '@relayplane/contract/credential-paths';
import { parsePattern } from '@relayplane/contract/moq-pattern';
import type { VerifiedCredential } from './claims.ts';

export type { PathAuthorization };

/**
 * What a verified credential grants a session dialing `path` (the broadcast path as the relay
 * sees it, project id first, e.g. `prj_…/room/42`), each pattern relative to `path`, as moq's
 * `Claims::authorize` decides: a path inside the credential's root narrows its patterns, one above
 * prepends the rest of the root, one beside it is refused. Nothing left: refused.
 */
export function authorizePath(
  credential: Pick<VerifiedCredential, 'paths'>,
  path: string,
): PathAuthorization {
  const { root, publish, subscribe } = credential.paths;
  return authorize(
    { root, publish: publish.map(parsePattern), subscribe: subscribe.map(parsePattern) },
    path,
  );
}
