/**
 * A relay for the tests: speaks moq-relay's session contract to an auth server exactly as the
 * relay does (upstream `moq-auth` client): one JSON POST per session event to the configured URL,
 * the URL's userinfo sent as HTTP Basic (what reqwest does with `https://user:pass@host`), a 2xx
 * grant admits, 401/403 refuses, anything else (another status, a refused connection, a body
 * that is no grant) is an outage: a `connect` is refused, a live session keeps its grant until
 * `expires`. It forwards no traffic: sessions are records the test drives.
 */
import { randomBytes } from 'node:crypto';

export interface Grant {
  publish?: string[];
  subscribe?: string[];
  root?: string;
  expires?: number;
  revalidate?: number;
  tier?: string;
}

export type Answer =
  | { kind: 'granted'; grant: Grant }
  | { kind: 'refused'; status: number; reason: string }
  | { kind: 'outage'; detail: string };

export interface SimSession {
  id: string;
  path: string;
  query: string;
  grant: Grant;
  /** Set once the session ended (refused at a revalidation, expired, or ended by the relay). */
  ended?: string;
}

export class RelaySim {
  readonly node: string;
  readonly sessions = new Map<string, SimSession>();
  #url: string;
  #authorization: string;

  /** `authUrl`: `http://<relay_id>:<token>@127.0.0.1:<port>/v1/relays/auth`, as an operator configures it. */
  constructor(authUrl: string, node: string) {
    const url = new URL(authUrl);
    this.#authorization = `Basic ${Buffer.from(
      `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`,
    ).toString('base64')}`;
    url.username = '';
    url.password = '';
    this.#url = url.toString();
    this.node = node;
  }

  async #post(body: Record<string, unknown>): Promise<Answer> {
    let res: Response;
    try {
      res = await fetch(this.#url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: this.#authorization },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      });
    } catch (err) {
      return { kind: 'outage', detail: String(err) };
    }
    const text = await res.text();
    if (res.status === 401 || res.status === 403)
      return { kind: 'refused', status: res.status, reason: text };
    if (res.status === 204) return { kind: 'granted', grant: {} };
    if (res.status < 200 || res.status > 299) return { kind: 'outage', detail: `${res.status} ${text}` };
    try {
      const grant = JSON.parse(text) as Grant;
      if ((grant.publish ?? []).length === 0 && (grant.subscribe ?? []).length === 0)
        return { kind: 'refused', status: res.status, reason: 'a grant naming nothing' };
      return { kind: 'granted', grant };
    } catch {
      return { kind: 'outage', detail: `not JSON: ${text}` };
    }
  }

  /** A session accepted at `path` with the credential in the query, as a browser dials it. */
  async connect(credential: string, path = '/demo/room', id = randomBytes(16).toString('hex')) {
    const query = `jwt=${credential}`;
    const answer = await this.#post({
      id,
      event: 'connect',
      node: this.node,
      transport: 'webtransport',
      remote: '203.0.113.9:4433',
      path,
      query,
    });
    if (answer.kind === 'granted') this.sessions.set(id, { id, path, query, grant: answer.grant });
    return { id, answer };
  }

  /**
   * One revalidation of a live session. Refused: the session ends (the relay closes it). Outage:
   * the grant stands until its `expires`.
   */
  async revalidate(id: string): Promise<Answer> {
    const session = this.sessions.get(id);
    if (!session || session.ended) throw new Error(`no live session ${id}`);
    const answer = await this.#post({
      id,
      event: 'revalidate',
      node: this.node,
      transport: 'webtransport',
      remote: '203.0.113.9:4433',
      path: session.path,
      query: session.query,
    });
    if (answer.kind === 'granted') session.grant = answer.grant;
    else if (answer.kind === 'refused') session.ended = 'refused';
    else if ((session.grant.expires ?? Number.POSITIVE_INFINITY) <= Date.now() / 1000)
      session.ended = 'expired';
    return answer;
  }

  /** The relay's end of a session: reason, duration and bytes, sent once. */
  async end(id: string, bytes = { sent: 0, received: 0 }, durationSeconds = 1): Promise<Answer> {
    const session = this.sessions.get(id);
    if (session) session.ended ??= 'done';
    return this.#post({
      id,
      event: 'end',
      reason: 'done',
      duration: durationSeconds,
      bytes,
      node: this.node,
      transport: 'webtransport',
      remote: '203.0.113.9:4433',
      path: session?.path ?? '/',
    });
  }

  /** Sends a raw event (e.g. claiming another node's name). */
  raw(body: Record<string, unknown>): Promise<Answer> {
    return this.#post(body);
  }

  /** The relay dies: no `end` is ever sent for its sessions. */
  die(): void {
    this.sessions.clear();
  }
}
