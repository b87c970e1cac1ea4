/** Relay configuration: health window, assignment size, and the static relays file. */

import { type EnvReader, readYamlFile } from '@relayplane/shared/config';
import { ISSUER } from '../settings.ts';
import { hostPort, isPort, isRegion, normalizeHost, parseHostPort } from './relay-fields.ts';

export interface StaticRelay {
  id: string;
  region: string;
  host: string;
  port: number;
}

export interface RelayConfig {
  /** A registered relay is healthy while its last heartbeat is at most this old. */
  healthWindowSeconds: number;
  /** How often each replica reloads the registry from the database (besides bus messages). */
  refreshIntervalMs: number;
  /** Always healthy; from RELAYPLANE_RELAYS_FILE (embedded mode: the demo ones). */
  staticRelays: StaticRelay[];
  /** Operator-configured entry points, `host:port`. */
  fallback: string[];
  /** How many relays a client is handed at most. */
  maxAssigned: number;
}

/** Embedded mode's relays when no RELAYPLANE_RELAYS_FILE is given: two regions on loopback. */
export const DEMO_RELAYS: { staticRelays: StaticRelay[]; fallback: string[] } = {
  staticRelays: [
    { id: 'rly_static_eu-west_1', region: 'eu-west', host: '127.0.0.1', port: 4433 },
    { id: 'rly_static_us-east_1', region: 'us-east', host: '127.0.0.1', port: 4434 },
  ],
  fallback: ['127.0.0.1:4443'],
};

/**
 * Reads ISSUER_RELAY_HEALTH_WINDOW_SECONDS, ISSUER_RELAY_REFRESH_MS, ISSUER_MAX_ASSIGNED_RELAYS
 * and RELAYPLANE_RELAYS_FILE. An override replaces what the variable would give (embedded
 * mode passes `DEMO_RELAYS` when no relays file is set).
 */
export function readRelayConfig(r: EnvReader, overrides: Partial<RelayConfig> = {}): RelayConfig {
  const file =
    overrides.staticRelays && overrides.fallback
      ? undefined
      : readYamlFile(r, ISSUER.relaysFile.env, parseRelaysDocument);
  return {
    healthWindowSeconds: overrides.healthWindowSeconds ?? r.read(ISSUER.relayHealthWindow),
    refreshIntervalMs: overrides.refreshIntervalMs ?? r.read(ISSUER.relayRefresh),
    maxAssigned: overrides.maxAssigned ?? r.read(ISSUER.maxAssignedRelays),
    staticRelays: overrides.staticRelays ?? file?.staticRelays ?? [],
    fallback: overrides.fallback ?? file?.fallback ?? [],
  };
}

const STATIC_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Validates a parsed relays document:
 * `{ relays?: [{ id?, region, host, port }], fallback?: ["host:port", …] }`.
 * Throws an Error whose message starts with the path of the offending value.
 */
function parseRelaysDocument(doc: unknown): { staticRelays: StaticRelay[]; fallback: string[] } {
  if (!isRecord(doc)) throw new Error('must be a mapping with "relays" and/or "fallback" keys');
  for (const key of Object.keys(doc)) {
    if (key !== 'relays' && key !== 'fallback')
      throw new Error(`${key}: unknown key (known: relays, fallback)`);
  }
  const staticRelays: StaticRelay[] = [];
  const ids = new Set<string>();
  const addresses = new Set<string>();
  const perRegion = new Map<string, number>();
  const relays = doc.relays ?? [];
  if (!Array.isArray(relays)) throw new Error('relays: must be a list');
  relays.forEach((raw: unknown, i) => {
    const at = `relays[${i}]`;
    if (!isRecord(raw)) throw new Error(`${at}: must be a mapping with region, host and port`);
    for (const key of Object.keys(raw)) {
      if (!['id', 'region', 'host', 'port'].includes(key)) {
        throw new Error(`${at}.${key}: unknown key (known: id, region, host, port)`);
      }
    }
    const { region, host, port, id } = raw;
    if (typeof region !== 'string' || !isRegion(region)) {
      throw new Error(`${at}.region: must be 1-32 lowercase letters, digits or hyphens`);
    }
    const canonical = typeof host === 'string' ? normalizeHost(host) : undefined;
    if (canonical === undefined) throw new Error(`${at}.host: must be a hostname or an IP address`);
    if (!isPort(port)) throw new Error(`${at}.port: must be an integer between 1 and 65535`);
    const n = (perRegion.get(region) ?? 0) + 1;
    perRegion.set(region, n);
    if (id !== undefined && (typeof id !== 'string' || !STATIC_ID_PATTERN.test(id))) {
      throw new Error(`${at}.id: must be 1-64 lowercase letters, digits, "_" or "-"`);
    }
    const relayId = id ?? `rly_static_${region}_${n}`;
    if (ids.has(relayId)) throw new Error(`${at}.id: duplicate relay id ${relayId}`);
    const address = hostPort(canonical, port);
    if (addresses.has(address)) throw new Error(`${at}: duplicate address ${address}`);
    ids.add(relayId);
    addresses.add(address);
    staticRelays.push({ id: relayId, region, host: canonical, port });
  });
  const fallbackRaw = doc.fallback ?? [];
  if (!Array.isArray(fallbackRaw)) throw new Error('fallback: must be a list of "host:port" entries');
  const fallback: string[] = [];
  fallbackRaw.forEach((entry: unknown, i) => {
    const parsed = typeof entry === 'string' ? parseHostPort(entry) : undefined;
    if (!parsed) throw new Error(`fallback[${i}]: must be "host:port" ("[v6]:port" for IPv6)`);
    const address = hostPort(parsed.host, parsed.port);
    if (fallback.includes(address)) throw new Error(`fallback[${i}]: duplicate entry ${address}`);
    fallback.push(address);
  });
  return { staticRelays, fallback };
}
