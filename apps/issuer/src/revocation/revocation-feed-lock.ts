/**
 * Every write to the revocation feed (a revoked credential, a raised project watermark, a
 * revoked signing key) takes this transaction-scoped advisory lock before it takes its feed
 * sequence, so sequences become visible in the order they were taken: a reader past sequence
 * n never misses a later commit of n-1.
 */
export const REVOCATION_FEED_LOCK = 0x72706376; // "rpcv"
