/**
 * One webhook delivery attempt (issue 34): a POST of the exact body with its Standard Webhooks
 * headers to a target `checkTarget` allowed, connecting to the address it checked (no second
 * resolution of the name between check and connect), following no redirect, reading at most the
 * first KiB of the answer and giving up after the timeout (10 s by default). Only a 2xx counts as
 * delivered; a 3xx is an answer like any other failure (not followed).
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import type { WebhookHeaders } from './webhook-signature.ts';

export const WEBHOOK_TIMEOUT_MS = 10_000;
/** The part of an answer's body kept in the delivery log. */
export const WEBHOOK_RESPONSE_BYTES = 1_024;

export interface WebhookAttempt {
  /** 2xx. */
  delivered: boolean;
  /** The HTTP status, or undefined when there was no answer (timeout, refused, reset). */
  status?: number;
  /** The first KiB of the answer's body (UTF-8, replacement characters for a cut sequence). */
  body: string;
  /** Why there was no answer. */
  error?: string;
  latencyMs: number;
}

export interface SendOptions {
  timeoutMs?: number;
  /** A pinned address's TLS check: extra CA certificates (tests' local https receivers). */
  ca?: string | Buffer;
}

/** POSTs `body` to `url` at `address` (one `checkTarget` allowed). */
export function sendWebhook(
  url: URL,
  address: string,
  headers: WebhookHeaders,
  body: string,
  options: SendOptions = {},
): Promise<WebhookAttempt> {
  const started = performance.now();
  const timeoutMs = options.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const family = isIP(address);
  // The name resolves to the address already checked, whatever DNS says now.
  const lookup: LookupFunction = (_host, opts, callback) => {
    if ((opts as { all?: boolean }).all)
      (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }]);
    else callback(null, address, family);
  };
  const payload = Buffer.from(body);
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    let settled = false;
    const finish = (attempt: Omit<WebhookAttempt, 'latencyMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...attempt, latencyMs: Math.round(performance.now() - started) });
    };
    const req = send(
      url,
      {
        method: 'POST',
        lookup,
        agent: false,
        ...(options.ca ? { ca: options.ca } : {}),
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': String(payload.length),
          'user-agent': 'Relayplane-Webhooks/1',
        },
      },
      (res: IncomingMessage) => {
        const status = res.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let kept = 0;
        res.on('data', (chunk: Buffer) => {
          if (kept < WEBHOOK_RESPONSE_BYTES) {
            const part = chunk.subarray(0, WEBHOOK_RESPONSE_BYTES - kept);
            chunks.push(part);
            kept += part.length;
          }
          // The rest is not read into memory: the attempt is decided by the status.
          if (kept >= WEBHOOK_RESPONSE_BYTES) res.destroy();
        });
        const done = () =>
          finish({
            delivered: status >= 200 && status < 300,
            status,
            body: Buffer.concat(chunks).toString('utf8'),
          });
        res.on('end', done);
        res.on('close', done);
        res.on('error', done);
      },
    );
    const timer = setTimeout(() => {
      finish({ delivered: false, body: '', error: `no answer within ${timeoutMs} ms` });
      req.destroy();
    }, timeoutMs);
    req.on('error', (err) => finish({ delivered: false, body: '', error: err.message }));
    req.end(payload);
  });
}
