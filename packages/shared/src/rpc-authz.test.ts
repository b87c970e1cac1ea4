import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DescService } from '@bufbuild/protobuf';
import { SERVICES } from '@relayplane/contract/contract';
import { describe, expect, it } from 'vitest';
import { ANY_PEER, callersOf, methodName, RPC_CALLERS, renderRpcMatrix } from './rpc-authz.ts';

const GEN = join(import.meta.dirname, '..', '..', 'proto', 'src', 'gen');
const ARCHITECTURE = join(import.meta.dirname, '..', '..', '..', 'docs', 'ARCHITECTURE.md');

/** Every service descriptor the generated code of @relayplane/proto exports. */
async function protoServices(): Promise<DescService[]> {
  const files = (readdirSync(GEN, { recursive: true }) as string[]).filter((f) => f.endsWith('_pb.js'));
  const services: DescService[] = [];
  for (const file of files) {
    const module = (await import(join(GEN, file))) as Record<string, unknown>;
    for (const value of Object.values(module)) {
      if ((value as { kind?: string } | null)?.kind === 'service') services.push(value as DescService);
    }
  }
  return services;
}

describe('the RPC authorization matrix', () => {
  it('declares who may call every RPC of every service in @relayplane/proto, and nothing else', async () => {
    const services = await protoServices();
    expect(services.map((s) => s.typeName).sort()).toEqual([
      'grpc.health.v1.Health',
      'relayplane.admin.v1.AdminService',
      'relayplane.billing.v1.BillingService',
      'relayplane.issuer.v1.IssuerService',
    ]);
    const methods = services.flatMap((s) => s.methods);
    const undeclared = methods.filter((m) => callersOf(m) === undefined).map(methodName);
    expect(undeclared, 'add them to RPC_CALLERS in packages/shared/src/rpc-authz.ts').toEqual([]);
    const known = new Set(methods.map(methodName));
    expect(Object.keys(RPC_CALLERS).filter((name) => !known.has(name))).toEqual([]);
  });

  it('names only our four services (or any authenticated peer, for health), none twice', () => {
    for (const [name, callers] of Object.entries(RPC_CALLERS)) {
      if (callers === ANY_PEER) {
        expect(name.startsWith('grpc.health.v1.Health/'), name).toBe(true);
        continue;
      }
      expect(callers.length, name).toBeGreaterThan(0);
      expect(new Set(callers).size, name).toBe(callers.length);
      for (const caller of callers) expect(Object.values(SERVICES), name).toContain(caller);
    }
  });

  it('grants what issue 19 names: issuance and revocation to the gateway, usage summaries to billing, plan changes to the gateway and admin', () => {
    const callers = (name: string) => RPC_CALLERS[name];
    expect(callers('relayplane.issuer.v1.IssuerService/IssueCredentials')).toEqual(['gateway']);
    expect(callers('relayplane.issuer.v1.IssuerService/RevokeCredential')).toEqual(['gateway']);
    expect(callers('relayplane.issuer.v1.IssuerService/SummarizeUsage')).toEqual(['billing']);
    expect(callers('relayplane.billing.v1.BillingService/SetPlan')).toEqual(['gateway', 'admin']);
    expect(callers('relayplane.admin.v1.AdminService/RecordAuditEvents')).toEqual(['issuer', 'billing']);
  });

  it('is in docs/ARCHITECTURE.md as renderRpcMatrix() prints it', () => {
    const doc = readFileSync(ARCHITECTURE, 'utf8');
    const start = doc.indexOf('<!-- rpc-authz:start -->');
    const end = doc.indexOf('<!-- rpc-authz:end -->');
    expect(start, 'docs/ARCHITECTURE.md has no <!-- rpc-authz:start --> marker').toBeGreaterThan(-1);
    expect(doc.slice(start + '<!-- rpc-authz:start -->'.length, end).trim()).toBe(renderRpcMatrix());
  });
});
