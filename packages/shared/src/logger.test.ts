import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.ts';
import { runWithRequestContext } from './request-context.ts';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  const stream = {
    write(chunk: string) {
      raw.push(chunk);
      lines.push(JSON.parse(chunk) as Record<string, unknown>);
    },
  };
  return { lines, raw, logger: createLogger({ level: 'info', service: 'svc' }, stream) };
}

describe('logger', () => {
  it('redacts password, token, key and secret at the top level and one level down', () => {
    const { logger, lines, raw } = capture();
    logger.info(
      {
        password: 'hunter2',
        token: 'rpu_top',
        secret: 's3',
        key: 'k1',
        user: { password: 'nested-pw', token: 'rpu_nested', name: 'ada' },
      },
      'login',
    );
    expect(lines[0]).toMatchObject({
      password: '[redacted]',
      token: '[redacted]',
      secret: '[redacted]',
      key: '[redacted]',
      user: { password: '[redacted]', token: '[redacted]', name: 'ada' },
      msg: 'login',
      service: 'svc',
    });
    for (const leaked of ['hunter2', 'rpu_top', 'nested-pw', 'rpu_nested', 's3', 'k1']) {
      expect(raw.join(''), leaked).not.toContain(leaked);
    }
  });

  it('redacts the authorization, cookie and api-key request headers and set-cookie responses', () => {
    const { logger, lines, raw } = capture();
    logger.info({
      req: {
        method: 'GET',
        headers: {
          authorization: 'Bearer rpu_abc',
          cookie: 'sid=xyz',
          'x-api-key': 'rpk_live',
          'x-csrf-token': 'csrf1',
          accept: 'application/json',
        },
      },
      res: { headers: { 'set-cookie': 'sid=new' } },
    });
    expect(lines[0]).toMatchObject({
      req: {
        method: 'GET',
        headers: {
          authorization: '[redacted]',
          cookie: '[redacted]',
          'x-api-key': '[redacted]',
          'x-csrf-token': '[redacted]',
          accept: 'application/json',
        },
      },
      res: { headers: { 'set-cookie': '[redacted]' } },
    });
    for (const leaked of ['rpu_abc', 'sid=xyz', 'rpk_live', 'csrf1', 'sid=new']) {
      expect(raw.join(''), leaked).not.toContain(leaked);
    }
  });

  it('adds the request id of the current request context as reqId, and none outside one', async () => {
    const { logger, lines } = capture();
    await runWithRequestContext({ requestId: 'req-123' }, async () => {
      await Promise.resolve();
      logger.info('inside');
    });
    logger.info('outside');
    expect(lines[0]).toMatchObject({ msg: 'inside', reqId: 'req-123' });
    expect(lines[1]?.msg).toBe('outside');
    expect(lines[1]).not.toHaveProperty('reqId');
  });

  it('writes nothing below its level', () => {
    const { logger, lines } = capture();
    logger.debug('hidden');
    logger.warn('shown');
    expect(lines.map((l) => l.msg)).toEqual(['shown']);
  });
});
