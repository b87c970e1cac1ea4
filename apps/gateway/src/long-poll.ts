import type { FastifyReply } from 'fastify';

/**
 * Runs a held call (a long poll) with a signal that aborts when the client goes away or the
 * gateway starts shutting down. Cut short that way, it answers `undefined`: the caller answers
 * "nothing new" at once rather than an error nobody reads, and shutdown is not held up.
 */
export async function untilGone<T>(
  reply: FastifyReply,
  shutdown: AbortSignal,
  call: (signal: AbortSignal) => Promise<T>,
): Promise<T | undefined> {
  const controller = new AbortController();
  const abort = () => controller.abort();
  reply.raw.once('close', abort);
  shutdown.addEventListener('abort', abort, { once: true });
  try {
    return await call(controller.signal);
  } catch (err) {
    if (controller.signal.aborted) return undefined;
    throw err;
  } finally {
    reply.raw.off('close', abort);
    shutdown.removeEventListener('abort', abort);
  }
}
