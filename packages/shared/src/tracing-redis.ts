/**
 * Redis spans (docs/tracing.md): wired into every connection the factories in redis.ts make.
 */
import { endSpan, isRecording, isTracingEnabled, SpanKind, startChildSpan } from './tracing.ts';

/** What a Redis span reads of an ioredis connection (a server's or a cluster's client). */
interface TracedRedis {
  /** `stream` and `node`: what ioredis passes along internally (a pipeline's writer, a cluster's node). */
  sendCommand(command: RedisCommand, stream?: unknown, node?: unknown): unknown;
  readonly options?: { db?: number; host?: string; port?: number };
  readonly isCluster?: boolean;
}

/** What a Redis span reads of an ioredis command: its name and its outcome, never its arguments. */
interface RedisCommand {
  readonly name: string;
  readonly promise: Promise<unknown>;
}

/** Commands with a span already: a cluster's redirection or a reconnect sends one again. */
const tracedCommands = new WeakSet<RedisCommand>();

/**
 * `redis` (a connection from the factories in redis.ts) with Redis spans: one CLIENT span per
 * command sent under a recorded span, named by the command (`EVALSHA`, `ZREM`, …), ended when its
 * reply (or failure) arrives. Its arguments (keys, values, script arguments) are never read.
 * Every command ioredis sends goes through the connection's `sendCommand` (scripts, pipelines,
 * MULTI, a cluster's routing), which is wrapped here on this one object: with tracing off nothing
 * is wrapped, and with it on a command outside a recorded span costs one test of the active
 * context. (ioredis' own `ioredis:command` tracing channel would do the same for every
 * connection of the process, but once subscribed it builds a message, stringifies the arguments
 * and wraps the reply promise for every command: about 1 µs per credential on the issuer's slot
 * script, measured; docs/tracing.md, Cost.)
 */
export function traceRedis<R extends object>(redis: R): R {
  if (!isTracingEnabled()) return redis;
  const target = redis as unknown as TracedRedis;
  const send = target.sendCommand;
  target.sendCommand = function tracedSendCommand(this: TracedRedis, command, stream, node) {
    // The cheap test first: outside a recorded span (almost every command) nothing else runs.
    if (!isRecording() || tracedCommands.has(command)) return send.call(this, command, stream, node);
    const name = typeof command.name === 'string' ? command.name.toUpperCase() : 'OTHER';
    const span = startChildSpan(name, SpanKind.CLIENT);
    if (!span) return send.call(this, command, stream, node); // not reached after isRecording(): for the type
    tracedCommands.add(command);
    span.setAttribute('db.system.name', 'redis');
    span.setAttribute('db.operation.name', name);
    // A cluster routes each command to a node only as it sends it: no server or database here.
    if (!this.isCluster && this.options) {
      span.setAttribute('db.namespace', String(this.options.db ?? 0));
      if (typeof this.options.host === 'string') span.setAttribute('server.address', this.options.host);
      if (typeof this.options.port === 'number') span.setAttribute('server.port', this.options.port);
    }
    let sent: unknown;
    try {
      sent = send.call(this, command, stream, node);
    } catch (err) {
      endSpan(span, err);
      throw err;
    }
    command.promise.then(
      () => endSpan(span),
      (err: unknown) => endSpan(span, err),
    );
    return sent;
  };
  return redis;
}
