/** A local Stripe API for the official SDK (`STRIPE_API_BASE`), so tests mock only the outside world. */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StripeRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The form-encoded body, as the SDK sends it. */
  form: URLSearchParams;
}

export interface StripeAnswer {
  /** Default 200. */
  status?: number;
  headers?: Record<string, string>;
  /** Sent as JSON. */
  body: unknown;
}

export interface StripeApi {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  close(): Promise<void>;
}

/** Serves `answer`'s replies; a request it answers undefined gets Stripe's unknown-route 404. */
export async function startStripeApi(
  answer: (req: StripeRequest) => StripeAnswer | undefined,
): Promise<StripeApi> {
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      const reply = answer({
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        form: new URLSearchParams(body),
      }) ?? {
        status: 404,
        body: { error: { type: 'invalid_request_error', message: 'Unrecognized request URL' } },
      };
      res.statusCode = reply.status ?? 200;
      res.setHeader('content-type', 'application/json');
      for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
      res.end(JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
