import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';
import { signingKeysMessage } from './messages.ts';

/** ListSigningKeys: every key, removed ones too, and the pending rotation request. */
export function listSigningKeys({
  keys,
}: Pick<IssuerDeps, 'keys'>): ServiceImpl<typeof IssuerService>['listSigningKeys'] {
  return async () => signingKeysMessage(await keys.list());
}
