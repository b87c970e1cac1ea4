/**
 * The in-process caller is the peer (issue 31, embedded mode): admin takes an audit event's
 * source from the caller the composition root named for the client, not from the request.
 * Over the network the same metadata key is ignored.
 */
import { randomBytes } from 'node:crypto';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { BillingService } from '@relayplane/billing';
import { AdminService as AdminRpc } from '@relayplane/proto/admin';
import { grpc, IN_PROCESS_CALLER_METADATA_KEY } from '@relayplane/proto/grpc';
import { connect } from '@relayplane/shared/rpc';
import { testLogger } from '@relayplane/testing/logger';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newEventId } from '../src/audit/canonical.ts';
import { readAdminConfig } from '../src/config.ts';
import { AdminService } from '../src/service.ts';
import { expectAppError, startBilling, TEST_KEK } from './support/harness.ts';

describe('audit sources from the in-process caller', () => {
  let database: TestDatabase;
  let billing: BillingService;
  let admin: AdminService;
  const address = `in-process:${randomBytes(6).toString('hex')}/admin`;

  beforeAll(async () => {
    database = await createTestDatabase('adminpeer');
    billing = await startBilling(database.url);
    admin = await AdminService.create(
      readAdminConfig(
        { ADMIN_DATABASE_URL: database.url, RELAYPLANE_KEK: TEST_KEK },
        { listen: address, billingAddress: `127.0.0.1:${billing.port}`, redis: undefined },
      ),
      { logger: testLogger('admin') },
    );
    await admin.start();
  });
  afterAll(async () => {
    await admin?.destroy();
    await billing?.destroy();
    await database?.drop();
  });

  const event = (action: string) => ({
    id: newEventId(new Date()),
    occurredAt: timestampFromDate(new Date()),
    tenantId: '',
    actor: { type: 'system', id: 'test' },
    action,
    target: { type: 'relay', id: 'rly_x' },
    outcome: 'success',
    detailsJson: '{}',
  });

  it('refuses a client named billing that claims issuer, and records as billing what it sends', async () => {
    const asBilling = connect(AdminRpc, address, { caller: 'billing', retries: false });
    try {
      await expectAppError(
        asBilling.recordAuditEvents({ source: 'issuer', events: [event('relay.register')] }),
        'invalid_request',
        'the caller is billing, not issuer',
      );
      await expectAppError(
        asBilling.recordAuditEvents({ source: '', events: [event('relay.register')] }),
        'invalid_request',
        'billing may not record relay.register',
      );
      await expect(
        asBilling.recordAuditEvents({ source: '', events: [event('plan.change')] }),
      ).resolves.toMatchObject({
        recorded: 1,
      });
      // Metadata naming another caller does not change who calls.
      const md = new grpc.Metadata();
      md.set(IN_PROCESS_CALLER_METADATA_KEY, 'issuer');
      await expectAppError(
        asBilling.recordAuditEvents({ source: '', events: [event('relay.register')] }, { metadata: md }),
        'invalid_request',
        'billing may not record relay.register',
      );
    } finally {
      asBilling.close();
    }
  });

  it('refuses an in-process client of another service (the gateway) outright', async () => {
    const asGateway = connect(AdminRpc, address, { caller: 'gateway', retries: false });
    try {
      await expectAppError(
        asGateway.recordAuditEvents({ source: 'billing', events: [event('plan.change')] }),
        'forbidden',
        'gateway does not deliver audit events',
      );
    } finally {
      asGateway.close();
    }
  });
});
