/**
 * A stand-in for the control plane's credential endpoints on 127.0.0.1: the JWKS (with
 * Cache-Control and ETag) and the long-polling revocation feed, checking the relay token.
 * Every request is recorded so tests can count them and wait for them.
 */
import { createHash } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SigningKey } from './tokens.ts';

export interface RecordedRequest {
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  status: number;
  /** performance.now() when the request arrived. */
  at: number;
}

interface Revocation {
  sequence: number;
  jti: string;
  revoked_at: string;
  expires_at: string | number;
}

interface HeldPoll {
  cursor: number;
  res: ServerResponse;
  timer: NodeJS.Timeout;
}

export const JWKS_PATH = '/v1/credentials/jwks';
export const FEED_PATH = '/v1/credentials/revocations';

export class FakeControlPlane {
  readonly relayToken: string;
  readonly requests: RecordedRequest[] = [];
  readonly events = new EventEmitter();
  /** Published keys, in JWKS order. */
  keys: SigningKey[] = [];
  cacheControl = 'max-age=300';
  /** Status the JWKS endpoint answers with instead of the key set (e.g. 500), or 200. */
  jwksStatus = 200;
  /** How many upcoming feed polls answer 500. */
  feedFailuresRemaining = 0;
  /** Feed polls whose client went away before they were answered. */
  abandonedPolls = 0;
  /** Sent as `watermarks` in every feed answer; undefined: omitted (a control plane before them). */
  watermarks: { project_id: unknown; issued_before: unknown }[] | undefined;
  readonly #revocations: Revocation[] = [];
  /** Sent as `revoked_keys` (with their feed positions); none sent until the first `revokeKey`. */
  readonly #revokedKeys: { sequence: number; kid: string; revoked_at: string }[] = [];
  /** The feed's last position (revocations and revoked keys share it). */
  #sequence = 0;
  readonly #held = new Set<HeldPoll>();
  #server: Server | undefined;
  #baseUrl = '';

  constructor(relayToken: string) {
    this.relayToken = relayToken;
  }

  static async start(relayToken = 'rnt_test_relay_token'): Promise<FakeControlPlane> {
    const plane = new FakeControlPlane(relayToken);
    const server = createServer((req, res) => plane.#handle(req.url ?? '/', req.headers, res));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    plane.#server = server;
    plane.#baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return plane;
  }

  get baseUrl(): string {
    return this.#baseUrl;
  }

  get jwksRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.path === JWKS_PATH);
  }

  get feedRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.path === FEED_PATH);
  }

  get heldPolls(): number {
    return this.#held.size;
  }

  /** Records a revocation and answers held polls; returns performance.now() at recording. */
  revoke(jti: string, expiresAt: string | number): number {
    this.#sequence += 1;
    const sequence = this.#sequence;
    const recordedAt = performance.now();
    this.#revocations.push({ sequence, jti, revoked_at: new Date().toISOString(), expires_at: expiresAt });
    for (const poll of this.#held) this.#answerFeed(poll.res, poll.cursor, poll);
    return recordedAt;
  }

  /**
   * Records a signing key revocation (moves the cursor, answers held polls) and, like the
   * issuer, stops publishing the key; returns performance.now() at recording.
   */
  revokeKey(kid: string): number {
    this.#sequence += 1;
    const recordedAt = performance.now();
    this.#revokedKeys.push({ sequence: this.#sequence, kid, revoked_at: new Date().toISOString() });
    this.keys = this.keys.filter((k) => k.kid !== kid);
    for (const poll of this.#held) this.#answerFeed(poll.res, poll.cursor, poll);
    return recordedAt;
  }

  /** Resolves with the first request (already seen or future) matching `predicate`. */
  waitForRequest(predicate: (r: RecordedRequest) => boolean, timeoutMs = 5_000): Promise<RecordedRequest> {
    const seen = this.requests.find(predicate);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.events.off('request', listener);
        reject(new Error(`no matching request within ${timeoutMs} ms`));
      }, timeoutMs);
      const listener = (r: RecordedRequest) => {
        if (!predicate(r)) return;
        clearTimeout(timer);
        this.events.off('request', listener);
        resolve(r);
      };
      this.events.on('request', listener);
    });
  }

  /** Resolves once a feed poll is being held open by the server. */
  async waitForHeldPoll(timeoutMs = 5_000): Promise<void> {
    if (this.#held.size > 0) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no held poll within ${timeoutMs} ms`)), timeoutMs);
      this.events.once('held', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  async close(): Promise<void> {
    for (const poll of this.#held) {
      clearTimeout(poll.timer);
      poll.res.destroy();
    }
    this.#held.clear();
    const server = this.#server;
    if (server === undefined) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #record(path: string, query: URLSearchParams, headers: IncomingHttpHeaders, status: number): void {
    const request = { path, query, headers, status, at: performance.now() };
    this.requests.push(request);
    this.events.emit('request', request);
  }

  #handle(rawUrl: string, headers: IncomingHttpHeaders, res: ServerResponse): void {
    const url = new URL(rawUrl, 'http://127.0.0.1');
    if (url.pathname === JWKS_PATH) {
      this.#serveJwks(url, headers, res);
    } else if (url.pathname === FEED_PATH) {
      this.#serveFeed(url, headers, res);
    } else {
      this.#record(url.pathname, url.searchParams, headers, 404);
      res.writeHead(404).end();
    }
  }

  #serveJwks(url: URL, headers: IncomingHttpHeaders, res: ServerResponse): void {
    if (this.jwksStatus !== 200) {
      this.#record(url.pathname, url.searchParams, headers, this.jwksStatus);
      res.writeHead(this.jwksStatus, { 'content-type': 'application/json' }).end('{"error":"unavailable"}');
      return;
    }
    const body = JSON.stringify({ keys: this.keys.map((k) => k.publicJwk) });
    const etag = `"${createHash('sha256').update(body).digest('base64url')}"`;
    const cacheHeaders = { 'cache-control': this.cacheControl, etag };
    if (headers['if-none-match'] === etag) {
      this.#record(url.pathname, url.searchParams, headers, 304);
      res.writeHead(304, cacheHeaders).end();
      return;
    }
    this.#record(url.pathname, url.searchParams, headers, 200);
    res.writeHead(200, { ...cacheHeaders, 'content-type': 'application/json' }).end(body);
  }

  #serveFeed(url: URL, headers: IncomingHttpHeaders, res: ServerResponse): void {
    if (headers.authorization !== `Bearer ${this.relayToken}`) {
      this.#record(url.pathname, url.searchParams, headers, 401);
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    if (this.feedFailuresRemaining > 0) {
      this.feedFailuresRemaining -= 1;
      this.#record(url.pathname, url.searchParams, headers, 500);
      res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"internal error"}');
      return;
    }
    this.#record(url.pathname, url.searchParams, headers, 200);
    const cursor = Number(url.searchParams.get('cursor') ?? '0');
    const wait = Math.min(30, Number(url.searchParams.get('wait') ?? '0'));
    if (
      wait <= 0 ||
      this.#revocations.some((r) => r.sequence > cursor) ||
      this.#revokedKeys.some((k) => k.sequence > cursor)
    ) {
      this.#answerFeed(res, cursor);
      return;
    }
    const poll: HeldPoll = {
      cursor,
      res,
      timer: setTimeout(() => this.#answerFeed(res, cursor, poll), wait * 1000),
    };
    this.#held.add(poll);
    res.on('close', () => {
      if (this.#held.delete(poll)) {
        clearTimeout(poll.timer);
        if (!res.writableEnded) this.abandonedPolls += 1;
      }
    });
    this.events.emit('held');
  }

  #answerFeed(res: ServerResponse, cursor: number, held?: HeldPoll): void {
    if (held !== undefined) {
      clearTimeout(held.timer);
      this.#held.delete(held);
    }
    const revocations = this.#revocations.filter((r) => r.sequence > cursor);
    const nextCursor = Math.max(
      revocations.at(-1)?.sequence ?? cursor,
      this.#revokedKeys.at(-1)?.sequence ?? cursor,
    );
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        revocations,
        next_cursor: nextCursor,
        ...(this.watermarks === undefined ? {} : { watermarks: this.watermarks }),
        ...(this.#revokedKeys.length === 0
          ? {}
          : { revoked_keys: this.#revokedKeys.map(({ kid, revoked_at }) => ({ kid, revoked_at })) }),
      }),
    );
  }
}
