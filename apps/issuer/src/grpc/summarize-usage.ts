import { AppError } from '@relayplane/contract/errors';
import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { parseDay } from '@relayplane/shared/usage-day';
import type { IssuerDeps } from './deps.ts';

/** SummarizeUsage: one UTC day recomputed from the credentials (billing's usage job calls it). */
export function summarizeUsage({
  usage,
}: Pick<IssuerDeps, 'usage'>): ServiceImpl<typeof IssuerService>['summarizeUsage'] {
  return async (req) => {
    const start = parseDay(req.day);
    if (!start) throw new AppError('invalid_request', 'day must be a calendar day as YYYY-MM-DD');
    return { summaries: await usage.summarize(start) };
  };
}
