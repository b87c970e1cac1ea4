/**
 * A local webhook receiver for tests: records every request (headers and the raw body) and
 * answers what the test queued (default 200).
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

export class Receiver {
  readonly received: Received[] = [];
  /** Per path: statuses to answer next (then 200). `hang` never answers. */
  readonly #answers = new Map<string, (number | 'hang')[]>();
  readonly #waiters: { test: () => boolean; resolve: () => void }[] = [];
  readonly #server: Server;
  #port = 0;

  constructor() {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url ?? '/';
        this.received.push({
          path,
          headers: req.headers,
          body: Buffer.concat(chunks).toString(),
          at: Date.now(),
        });
        for (const w of [...this.#waiters])
          if (w.test()) {
            this.#waiters.splice(this.#waiters.indexOf(w), 1);
            w.resolve();
          }
        const answer = this.#answers.get(path)?.shift() ?? 200;
        if (answer === 'hang') return;
        res.writeHead(answer, { 'content-type': 'text/plain' }).end(answer === 200 ? 'ok' : `no (${answer})`);
      });
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.#port = (this.#server.address() as AddressInfo).port;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.#port}${path}`;
  }

  answer(path: string, ...statuses: (number | 'hang')[]): void {
    this.#answers.set(path, [...(this.#answers.get(path) ?? []), ...statuses]);
  }

  at(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  /** Resolves once `test` holds (checked on every request), or rejects after `timeoutMs`. */
  until(test: () => boolean, timeoutMs = 10_000): Promise<void> {
    if (test()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('receiver: condition not met in time')), timeoutMs);
      this.#waiters.push({
        test,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
