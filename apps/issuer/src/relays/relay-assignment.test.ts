import { describe, expect, it } from 'vitest';
import {
  type AssignableRelay,
  assignRelays,
  compareByLoad,
  isHealthy,
  orderRelays,
} from './relay-assignment.ts';

const relay = (id: string, region: string, load: number, host = `${id}.example.net`, port = 443) =>
  ({ id, region, host, port, load }) satisfies AssignableRelay;

const ids = (relays: readonly AssignableRelay[]) => relays.map((r) => r.id);

describe('isHealthy', () => {
  const now = new Date('2026-11-22T12:00:00Z');
  const ago = (s: number) => new Date(now.getTime() - s * 1000);

  it('counts a static relay as healthy without any heartbeat', () => {
    expect(isHealthy({ static: true }, now, 30)).toBe(true);
  });

  it('counts a registered relay never heard from as unhealthy', () => {
    expect(isHealthy({ static: false }, now, 30)).toBe(false);
  });

  it('keeps a relay healthy up to exactly the window and not one millisecond past it', () => {
    expect(isHealthy({ static: false, lastHeartbeatAt: ago(0) }, now, 30)).toBe(true);
    expect(isHealthy({ static: false, lastHeartbeatAt: ago(30) }, now, 30)).toBe(true);
    expect(isHealthy({ static: false, lastHeartbeatAt: new Date(ago(30).getTime() - 1) }, now, 30)).toBe(
      false,
    );
  });
});

describe('orderRelays', () => {
  const relays = [
    relay('c', 'us-east', 0.1),
    relay('a', 'eu-west', 0.5),
    relay('b', 'eu-west', 0.2),
    relay('e', 'eu-west', 0.2),
    relay('d', 'us-east', 0.0),
  ];

  it('puts the requested region first, then least loaded, equal loads by id', () => {
    expect(ids(orderRelays(relays, 'eu-west'))).toEqual(['b', 'e', 'a', 'd', 'c']);
    expect(ids(orderRelays(relays, 'us-east'))).toEqual(['d', 'c', 'b', 'e', 'a']);
  });

  it('orders by load alone without a region or for a region no relay is in', () => {
    expect(ids(orderRelays(relays))).toEqual(['d', 'c', 'b', 'e', 'a']);
    expect(ids(orderRelays(relays, 'ap-south'))).toEqual(['d', 'c', 'b', 'e', 'a']);
  });

  it('does not reorder its input', () => {
    const copy = [...relays];
    orderRelays(relays, 'eu-west');
    expect(relays).toEqual(copy);
  });

  it('compares by load, then by id', () => {
    expect(compareByLoad(relay('a', 'x', 0.3), relay('b', 'x', 0.2))).toBeGreaterThan(0);
    expect(compareByLoad(relay('a', 'x', 0.2), relay('b', 'x', 0.2))).toBeLessThan(0);
    expect(compareByLoad(relay('b', 'x', 0.2), relay('a', 'x', 0.2))).toBeGreaterThan(0);
    expect(compareByLoad(relay('a', 'x', 0.2), relay('a', 'y', 0.2))).toBe(0);
  });
});

describe('assignRelays', () => {
  const healthy = [
    relay('eu1', 'eu-west', 0.4),
    relay('eu2', 'eu-west', 0.1),
    relay('eu3', 'eu-west', 0.9),
    relay('us1', 'us-east', 0.3),
    relay('us2', 'us-east', 0.05),
    relay('ap1', 'ap-south', 0.2, '2001:db8::1', 4433),
  ];

  it('hands out at most maxAssigned relays, region first', () => {
    expect(ids(assignRelays(healthy, { region: 'eu-west', maxAssigned: 2, fallback: [] }).relays)).toEqual([
      'eu2',
      'eu1',
    ]);
    expect(ids(assignRelays(healthy, { region: 'eu-west', maxAssigned: 5, fallback: [] }).relays)).toEqual([
      'eu2',
      'eu1',
      'eu3',
      'us2',
      'ap1',
    ]);
    expect(ids(assignRelays(healthy, { maxAssigned: 3, fallback: [] }).relays)).toEqual([
      'us2',
      'eu2',
      'ap1',
    ]);
  });

  it('composes the fallback from the configured entry points and healthy relays of other regions', () => {
    const res = assignRelays(healthy, {
      region: 'eu-west',
      maxAssigned: 2,
      fallback: ['edge.example.net:443', 'us1.example.net:443'],
    });
    // Configured first, then other regions least loaded first; us1 is configured already.
    expect(res.fallback).toEqual([
      'edge.example.net:443',
      'us1.example.net:443',
      'us2.example.net:443',
      '[2001:db8::1]:4433',
    ]);
    expect(new Set(res.fallback).size).toBe(res.fallback.length);
  });

  it('takes the other regions relative to the first assigned relay, not the requested region', () => {
    const res = assignRelays(healthy, { region: 'sa-east', maxAssigned: 1, fallback: [] });
    expect(ids(res.relays)).toEqual(['us2']);
    expect(res.fallback).toEqual([
      'eu2.example.net:443',
      '[2001:db8::1]:4433',
      'eu1.example.net:443',
      'eu3.example.net:443',
    ]);
  });

  it('drops duplicate configured entry points', () => {
    const res = assignRelays([], { maxAssigned: 3, fallback: ['a.example:1', 'b.example:2', 'a.example:1'] });
    expect(res.fallback).toEqual(['a.example:1', 'b.example:2']);
  });

  it('still gives the configured fallback when no relay is healthy', () => {
    expect(
      assignRelays([], { region: 'eu-west', maxAssigned: 3, fallback: ['edge.example.net:443'] }),
    ).toEqual({
      relays: [],
      fallback: ['edge.example.net:443'],
    });
  });
});
