import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';
import { issueResponse } from './messages.ts';

/** IssueCredential: one credential per call (the gateway uses the streams on its hot path). */
export function issueCredential({
  issuance,
}: Pick<IssuerDeps, 'issuance'>): ServiceImpl<typeof IssuerService>['issueCredential'] {
  return async (req, call) => issueResponse(await issuance.issue(req, call.signal));
}
