/**
 * Relay assignment: which relays a client is handed, and in which order. Pure, so the
 * directory's hot path is a scan of memory and the rules are tested on their own.
 */
import { hostPort } from './relay-fields.ts';

export interface AssignableRelay {
  id: string;
  region: string;
  host: string;
  port: number;
  /** 0..1, from the last heartbeat (static relays: 0). */
  load: number;
}

export interface HealthFacts {
  static: boolean;
  lastHeartbeatAt?: Date | undefined;
}

/**
 * Static relays are always healthy; a registered one is healthy while its last heartbeat
 * is at most `windowSeconds` old. One never heard from is not.
 */
export function isHealthy(relay: HealthFacts, now: Date, windowSeconds: number): boolean {
  if (relay.static) return true;
  if (!relay.lastHeartbeatAt) return false;
  return now.getTime() - relay.lastHeartbeatAt.getTime() <= windowSeconds * 1000;
}

/** Least loaded first; equal loads by id, so every replica orders alike. */
export function compareByLoad(a: AssignableRelay, b: AssignableRelay): number {
  if (a.load !== b.load) return a.load - b.load;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** The requested region's relays first, then the rest; least loaded first within each. */
export function orderRelays<T extends AssignableRelay>(relays: readonly T[], region?: string): T[] {
  return [...relays].sort((a, b) => {
    if (region !== undefined) {
      const ra = a.region === region ? 0 : 1;
      const rb = b.region === region ? 0 : 1;
      if (ra !== rb) return ra - rb;
    }
    return compareByLoad(a, b);
  });
}

export interface Assignment<T> {
  relays: T[];
  /** `host:port` entry points: the configured ones, then healthy relays of other regions. */
  fallback: string[];
}

/**
 * Picks at most `maxAssigned` of the `healthy` relays in `orderRelays` order. The fallback
 * list is the configured entry points followed by the healthy relays whose region differs
 * from the first assigned relay's (least loaded first), without duplicates. With no healthy
 * relay at all the client still gets the configured entry points.
 */
export function assignRelays<T extends AssignableRelay>(
  healthy: readonly T[],
  options: { region?: string | undefined; maxAssigned: number; fallback: readonly string[] },
): Assignment<T> {
  const ordered = orderRelays(healthy, options.region);
  const relays = ordered.slice(0, Math.max(0, options.maxAssigned));
  const seen = new Set<string>();
  const fallback: string[] = [];
  const add = (entry: string) => {
    if (seen.has(entry)) return;
    seen.add(entry);
    fallback.push(entry);
  };
  for (const entry of options.fallback) add(entry);
  const primaryRegion = relays[0]?.region;
  const others = healthy.filter((r) => r.region !== primaryRegion).sort(compareByLoad);
  for (const relay of others) add(hostPort(relay.host, relay.port));
  return { relays, fallback };
}
