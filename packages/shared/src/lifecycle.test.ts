import { describe, expect, it } from 'vitest';
import { Lifecycle } from './lifecycle.ts';
import type { Logger } from './logger.ts';

function recordingLogger(errors: unknown[]): Logger {
  return { error: (obj: unknown) => errors.push(obj) } as unknown as Logger;
}

describe('Lifecycle', () => {
  it('closes in reverse order of registration, awaiting each closer before the next', async () => {
    const lifecycle = new Lifecycle();
    const order: string[] = [];
    const db = lifecycle.use('database', { name: 'db' }, async (r) => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      order.push(r.name);
    });
    expect(db).toEqual({ name: 'db' });
    lifecycle.use('redis', 'redis', (r) => order.push(r));
    lifecycle.onClose('server', async () => {
      await new Promise((resolve) => setTimeout(resolve, 10));
      order.push('server');
    });
    await lifecycle.close();
    expect(order).toEqual(['server', 'redis', 'db']);
  });

  it('runs the remaining closers when one fails, and logs the failure with its name', async () => {
    const errors: unknown[] = [];
    const lifecycle = new Lifecycle(recordingLogger(errors));
    const order: string[] = [];
    lifecycle.onClose('first', () => order.push('first'));
    lifecycle.onClose('broken', () => {
      throw new Error('boom');
    });
    lifecycle.onClose('last', () => order.push('last'));
    await lifecycle.close();
    expect(order).toEqual(['last', 'first']);
    expect(errors).toEqual([expect.objectContaining({ resource: 'broken' })]);
  });

  it('closes once: a second close waits for the first and runs nothing again', async () => {
    const lifecycle = new Lifecycle();
    let closed = 0;
    lifecycle.onClose('counted', async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      closed++;
    });
    await Promise.all([lifecycle.close(), lifecycle.close()]);
    await lifecycle.close();
    expect(closed).toBe(1);
    expect(() => lifecycle.onClose('late', () => {})).toThrow('late registered while the lifecycle closes');
  });

  it('closes what a failed build had opened, then rethrows its error', async () => {
    const lifecycle = new Lifecycle();
    const closed: string[] = [];
    await expect(
      lifecycle.build((l) => {
        l.onClose('opened', () => closed.push('opened'));
        throw new Error('database unreachable');
      }),
    ).rejects.toThrow('database unreachable');
    expect(closed).toEqual(['opened']);
    expect(await new Lifecycle().build(() => 42)).toBe(42);
  });
});
