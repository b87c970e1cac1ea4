/**
 * Conformance suite for the `Bus` port. Every implementation runs it.
 *
 * Absence of delivery is proved without sleeping: a message that must not arrive is
 * published before a sentinel the test does wait for. Both implementations deliver a
 * subscriber's messages in publish order, so once the sentinel is in, the other one
 * would have been too.
 */

import type { Bus } from '@relayplane/shared/bus';
import { afterEach, describe, expect, it } from 'vitest';
import { within } from './wait.ts';

export interface BusFactory {
  /** A new bus. Buses created with the same `namespace` share channels where the implementation can. */
  create(namespace: string): Promise<Bus>;
  /** Whether two buses of one namespace reach each other (true for a networked bus). */
  readonly sharesNamespace: boolean;
  /** Releases what `create` opened beyond the buses themselves. */
  cleanup?(): Promise<void>;
}

class Inbox {
  readonly messages: string[] = [];
  #waiters: { message: string; resolve: () => void }[] = [];
  readonly handler = (message: string) => {
    this.messages.push(message);
    for (const w of this.#waiters.filter((w) => w.message === message)) w.resolve();
    this.#waiters = this.#waiters.filter((w) => w.message !== message);
  };
  /** Resolves once `message` has arrived (now or earlier). */
  received(message: string, timeoutMs = 5_000): Promise<void> {
    if (this.messages.includes(message)) return Promise.resolve();
    return within(
      `message "${message}"`,
      new Promise<void>((resolve) => this.#waiters.push({ message, resolve })),
      timeoutMs,
    );
  }
}

export function busConformance(name: string, factory: BusFactory): void {
  describe(`Bus conformance: ${name}`, () => {
    const open: Bus[] = [];
    const create = async (namespace = 'default') => {
      const bus = await factory.create(namespace);
      open.push(bus);
      return bus;
    };

    afterEach(async () => {
      await Promise.all(open.splice(0).map((b) => b.close()));
      await factory.cleanup?.();
    });

    it('delivers a published message to a subscriber of that channel, and not to other channels', async () => {
      const bus = await create();
      const wanted = new Inbox();
      const other = new Inbox();
      await bus.subscribe('projects', wanted.handler);
      await bus.subscribe('tenants', other.handler);
      await bus.publish('projects', 'prj_1 changed');
      await bus.publish('tenants', 'sentinel');
      await wanted.received('prj_1 changed');
      await other.received('sentinel');
      expect(wanted.messages).toEqual(['prj_1 changed']);
      expect(other.messages).toEqual(['sentinel']);
    });

    it('delivers messages of one channel in publish order', async () => {
      const bus = await create();
      const inbox = new Inbox();
      await bus.subscribe('c', inbox.handler);
      for (let i = 0; i < 20; i++) await bus.publish('c', `m${i}`);
      await inbox.received('m19');
      expect(inbox.messages).toEqual(Array.from({ length: 20 }, (_, i) => `m${i}`));
    });

    it('delivers each message to both of two subscribers of the channel', async () => {
      const bus = await create();
      const a = new Inbox();
      const b = new Inbox();
      await bus.subscribe('keys', a.handler);
      await bus.subscribe('keys', b.handler);
      await bus.publish('keys', 'revoked');
      await Promise.all([a.received('revoked'), b.received('revoked')]);
      await bus.publish('keys', 'second');
      await Promise.all([a.received('second'), b.received('second')]);
      expect(a.messages).toEqual(['revoked', 'second']);
      expect(b.messages).toEqual(['revoked', 'second']);
    });

    it('stops delivering to a handler once it unsubscribed, while other handlers keep receiving', async () => {
      const bus = await create();
      const leaving = new Inbox();
      const staying = new Inbox();
      const unsubscribe = await bus.subscribe('c', leaving.handler);
      await bus.subscribe('c', staying.handler);
      await bus.publish('c', 'before');
      await Promise.all([leaving.received('before'), staying.received('before')]);
      await unsubscribe();
      await bus.publish('c', 'after');
      await staying.received('after');
      expect(leaving.messages).toEqual(['before']);
    });

    it('stops delivering on a channel whose last handler unsubscribed', async () => {
      const bus = await create();
      const leaving = new Inbox();
      const sentinel = new Inbox();
      const unsubscribe = await bus.subscribe('gone', leaving.handler);
      await bus.subscribe('sentinel', sentinel.handler);
      await unsubscribe();
      await bus.publish('gone', 'lost');
      await bus.publish('sentinel', 'done');
      await sentinel.received('done');
      expect(leaving.messages).toEqual([]);
    });

    it('subscribes again after the last handler left, and a repeated unsubscribe does not remove the new one', async () => {
      const bus = await create();
      const first = new Inbox();
      const second = new Inbox();
      const unsubscribeFirst = await bus.subscribe('c', first.handler);
      await unsubscribeFirst();
      await bus.subscribe('c', second.handler);
      await unsubscribeFirst();
      await bus.publish('c', 'hello');
      await second.received('hello');
      expect(first.messages).toEqual([]);
    });

    it('a subscription is live as soon as subscribe resolves, even when another subscribe of the channel is in flight', async () => {
      const bus = await create();
      const a = new Inbox();
      const b = new Inbox();
      const pending = bus.subscribe('race', a.handler);
      await bus.subscribe('race', b.handler);
      await bus.publish('race', 'now');
      await b.received('now');
      await pending;
      await a.received('now');
    });

    it('isolates buses of different namespaces from each other', async () => {
      const blue = await create('blue');
      const green = await create('green');
      const blueInbox = new Inbox();
      const greenInbox = new Inbox();
      await blue.subscribe('c', blueInbox.handler);
      await green.subscribe('c', greenInbox.handler);
      await blue.publish('c', 'for blue');
      await green.publish('c', 'for green');
      await blueInbox.received('for blue');
      await greenInbox.received('for green');
      // Each bus delivers in order, so a leak would have shown up before its own message.
      await blue.publish('c', 'blue sentinel');
      await green.publish('c', 'green sentinel');
      await Promise.all([blueInbox.received('blue sentinel'), greenInbox.received('green sentinel')]);
      expect(blueInbox.messages).toEqual(['for blue', 'blue sentinel']);
      expect(greenInbox.messages).toEqual(['for green', 'green sentinel']);
    });

    if (factory.sharesNamespace) {
      it('reaches a subscriber on another bus of the same namespace (another replica)', async () => {
        const publisher = await create('shared');
        const replica = await create('shared');
        const inbox = new Inbox();
        await replica.subscribe('c', inbox.handler);
        await publisher.publish('c', 'across replicas');
        await inbox.received('across replicas');
      });
    }

    it('delivers nothing after close and publishing to a channel nobody listens on succeeds', async () => {
      const bus = await create();
      const inbox = new Inbox();
      await bus.subscribe('c', inbox.handler);
      await bus.publish('nobody', 'void');
      await bus.close();
      const observer = await create();
      const sentinel = new Inbox();
      await observer.subscribe('c', sentinel.handler);
      await observer.publish('c', 'after close');
      await sentinel.received('after close');
      expect(inbox.messages).toEqual([]);
    });
  });
}
