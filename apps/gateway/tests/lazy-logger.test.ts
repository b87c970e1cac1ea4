import { Writable } from 'node:stream';
import { createLogger } from '@relayplane/shared/logger';
import type { FastifyBaseLogger } from 'fastify';
import { describe, expect, it, vi } from 'vitest';
import { lazyChildLoggerFactory } from '../src/lazy-logger.ts';

function logger(level: 'info' | 'warn') {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString('utf8')));
      done();
    },
  });
  return {
    parent: createLogger({ level, service: 'gateway' }, stream) as unknown as FastifyBaseLogger,
    lines,
  };
}

describe('lazy request loggers', () => {
  it('build no child while nothing is logged at an enabled level', () => {
    const { parent, lines } = logger('warn');
    const child = vi.spyOn(parent, 'child');
    const log = lazyChildLoggerFactory(parent, { reqId: 'r1' }, {});
    log.info('incoming request');
    log.debug('details');
    expect(child).not.toHaveBeenCalled();
    expect(lines).toEqual([]);
    expect(log.level).toBe('warn');
  });

  it('log through one child with the request binding once an enabled level is used', () => {
    const { parent, lines } = logger('info');
    const child = vi.spyOn(parent, 'child');
    const log = lazyChildLoggerFactory(parent, { reqId: 'r2' }, {});
    log.info({ route: '/x' }, 'first');
    log.warn('second');
    expect(child).toHaveBeenCalledTimes(1);
    expect(lines.map((l) => [l.msg, l.reqId, l.level])).toEqual([
      ['first', 'r2', 30],
      ['second', 'r2', 40],
    ]);
    expect(lines[0]?.route).toBe('/x');
  });

  it("honour a route's own level (Fastify's logLevel route option)", () => {
    const { parent, lines } = logger('info');
    const log = lazyChildLoggerFactory(parent, { reqId: 'r3' }, { level: 'warn' });
    log.info('hidden');
    expect(lines).toEqual([]);
    log.error('shown');
    expect(lines.map((l) => [l.msg, l.reqId])).toEqual([['shown', 'r3']]);
    const silent = lazyChildLoggerFactory(parent, { reqId: 'r4' }, { level: 'silent' });
    silent.fatal('never');
    expect(lines).toHaveLength(1);
  });
});
