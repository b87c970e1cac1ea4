/**
 * Open-loop load at a steady rate, for the latency at a given load.
 *
 * autocannon's rate limit (`overallRate`) is a budget per connection and second: every
 * connection sends back to back until it has used its share of the second, then waits for the
 * next one (autocannon/lib/httpClient.js, `reqsMadeThisSecond`). At "half rate" the service
 * sees its full concurrency for about half of every second and nothing for the rest, so the p99
 * it reports is that of bursts at full load. Here requests fall due at evenly spaced times
 * (checked every millisecond) and go out on up to `connections` keep-alive connections; one
 * that finds every connection busy waits for a free one, and its latency counts from when it
 * fell due, not from when it could be sent (no coordinated omission).
 *
 * The client is raw TCP with the request bytes built once and a minimal HTTP/1.1 response
 * reader (status line, Content-Length, body), so that it takes little of the CPU it shares
 * with the services; it is made for the gateway's answers, and an answer without
 * Content-Length (chunked) fails its connection rather than being misread.
 */
import { connect, type Socket } from 'node:net';

export interface PacedOptions {
  url: string;
  rate: number;
  durationSeconds: number;
  connections: number;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface PacedResult {
  /** Requests answered per second over the run. */
  rps: number;
  /** Latency percentiles (ms, one decimal) from the moment each request fell due. */
  p50: number;
  p90: number;
  p99: number;
  max: number;
  non2xx: number;
  errors: number;
}

const HEADER_END = Buffer.from('\r\n\r\n');

interface Connection {
  socket: Socket;
  /** When the request in flight fell due (performance.now()); undefined: idle. */
  due: number | undefined;
  buffer: Buffer;
}

export async function paced(o: PacedOptions): Promise<PacedResult> {
  const url = new URL(o.url);
  const body = o.body ?? '';
  const headers: Record<string, string> = { host: url.host, connection: 'keep-alive', ...o.headers };
  if (body) headers['content-length'] = String(Buffer.byteLength(body));
  const requestBytes = Buffer.from(
    `${o.method ?? 'GET'} ${url.pathname}${url.search} HTTP/1.1\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('')}\r\n${body}`,
  );
  const total = Math.max(1, Math.round(o.rate * o.durationSeconds));
  const latencies: number[] = [];
  const waiting: number[] = []; // due times of requests waiting for a free connection
  const idle: Connection[] = [];
  let sent = 0;
  let non2xx = 0;
  let errors = 0;
  let settle: () => void = () => {};
  const finished = new Promise<void>((resolve) => {
    settle = resolve;
  });
  const record = (due: number, ok: boolean, failed = false) => {
    latencies.push(performance.now() - due);
    if (failed) errors++;
    else if (!ok) non2xx++;
    if (latencies.length === total) settle();
  };
  const dispatch = (c: Connection) => {
    const due = waiting.shift();
    if (due === undefined) {
      c.due = undefined;
      idle.push(c);
      return;
    }
    c.due = due;
    c.socket.write(requestBytes);
  };
  const open = (): Connection => {
    const c: Connection = {
      socket: connect(Number(url.port), url.hostname),
      due: undefined,
      buffer: Buffer.alloc(0),
    };
    c.socket.setNoDelay(true);
    c.socket.on('data', (chunk: Buffer) => {
      c.buffer = c.buffer.length ? Buffer.concat([c.buffer, chunk]) : chunk;
      for (;;) {
        const end = c.buffer.indexOf(HEADER_END);
        if (end < 0 || c.due === undefined) return;
        const head = c.buffer.subarray(0, end).toString('latin1');
        const declared = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
        if (declared === undefined) {
          // Only Content-Length framing is read (the gateway's answers); anything else would
          // be misread, so it fails the connection and counts as an error.
          c.socket.destroy();
          return;
        }
        const length = Number(declared);
        if (c.buffer.length < end + 4 + length) return;
        const status = Number(head.slice(9, 12));
        c.buffer = c.buffer.subarray(end + 4 + length);
        record(c.due, status >= 200 && status < 300);
        dispatch(c);
      }
    });
    c.socket.on('error', () => {});
    c.socket.on('close', () => {
      // A lost connection fails what it carried; the rest go on the others.
      if (c.due !== undefined) record(c.due, false, true);
      c.due = undefined;
      const i = idle.indexOf(c);
      if (i >= 0) idle.splice(i, 1);
      const j = connections.indexOf(c);
      if (j >= 0) connections.splice(j, 1);
      if (connections.length === 0) while (waiting.length) record(waiting.shift() as number, false, true);
    });
    return c;
  };
  const connections: Connection[] = [];
  for (let i = 0; i < o.connections; i++) {
    const c = open();
    connections.push(c);
    idle.push(c);
  }
  // Connected before the clock starts: the first requests do not wait for handshakes.
  await Promise.all(
    connections.map(
      (c) =>
        new Promise<void>((resolve, reject) => {
          c.socket.once('connect', resolve);
          c.socket.once('error', reject);
        }),
    ),
  );

  const start = performance.now();
  const timer = setInterval(() => {
    const dueNow = Math.min(total, Math.floor(((performance.now() - start) / 1000) * o.rate));
    for (; sent < dueNow; sent++) {
      const due = start + (sent * 1000) / o.rate;
      // Every connection lost: what falls due fails at once.
      if (connections.length === 0) {
        record(due, false, true);
        continue;
      }
      waiting.push(due);
      const c = idle.pop();
      if (c) dispatch(c);
    }
    if (sent === total) clearInterval(timer);
  }, 1);
  // Whatever is still unanswered 10 s after the last request fell due counts as failed.
  const deadline = setTimeout(
    () => {
      for (const c of connections) c.socket.destroy();
    },
    (o.durationSeconds + 10) * 1000,
  );
  await finished;
  clearTimeout(deadline);
  clearInterval(timer);
  const elapsed = (performance.now() - start) / 1000;
  for (const c of connections) c.socket.destroy();
  const sorted = latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    Math.round((sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0) * 10) / 10;
  return {
    rps: Math.round(total / elapsed),
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    max: at(1),
    non2xx,
    errors,
  };
}
