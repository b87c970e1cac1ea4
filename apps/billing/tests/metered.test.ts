/**
 * Stripe metered usage: the billing service in Stripe mode (the official SDK against a local
 * server speaking POST /v1/billing/meter_events), the real issuer over gRPC as the source of
 * the counts, PostgreSQL real. The customer comes from a signed webhook; each completed UTC day
 * is sent once, today never, a failed call is retried by the next aggregation.
 */

import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import { MemoryScheduler } from '@relayplane/shared/scheduler';
import { testLogger } from '@relayplane/testing/logger';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { sql } from 'kysely';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  insertCredentials as insertIssuerCredentials,
  newKek,
  type RunningIssuer,
  startIssuer,
} from '../../issuer/tests/support/harness.ts';
import { DEFAULT_PLANS } from '../src/domain/plans.ts';
import { type Billing, startBilling } from './support/harness.ts';
import { type StripeApi, startStripeApi } from './support/stripe-api.ts';

const SECRET_KEY = 'sk_test_relayplanemetered';
const WEBHOOK_SECRET = 'whsec_relayplanemeteredsecret';
const EVENT_NAME = 'relay_credentials';

const DAY = '2026-05-20';
const NEXT = '2026-05-21';
const LAST = '2026-05-22';
/** `hh:mm` on DAY (or `dayOffset` days from it), UTC. */
const at = (hhmm: string, dayOffset = 0) =>
  new Date(Date.parse(`${DAY}T${hhmm}:00Z`) + dayOffset * 86_400_000);

interface MeterRequest {
  form: URLSearchParams;
  status: number;
}

/** POST /v1/billing/meter_events like Stripe (form-encoded); `fail` answers 500. */
class FakeStripe {
  readonly requests: MeterRequest[] = [];
  fail = false;
  #api: StripeApi | undefined;

  async start(): Promise<string> {
    this.#api = await startStripeApi(({ method, path, form }) => {
      if (method !== 'POST' || path !== '/v1/billing/meter_events') return undefined;
      if (this.fail) {
        this.requests.push({ form, status: 500 });
        return {
          status: 500,
          // One request per failed call (no SDK retry), so the test counts calls exactly.
          headers: { 'stripe-should-retry': 'false' },
          body: { error: { type: 'api_error', message: 'Something went wrong' } },
        };
      }
      this.requests.push({ form, status: 200 });
      return {
        body: {
          object: 'billing.meter_event',
          created: Math.floor(Date.now() / 1000),
          event_name: form.get('event_name'),
          identifier: form.get('identifier'),
          livemode: false,
          payload: {
            stripe_customer_id: form.get('payload[stripe_customer_id]'),
            value: form.get('payload[value]'),
          },
          timestamp: Number(form.get('timestamp')),
        },
      };
    });
    return this.#api.url;
  }

  /** Identifiers Stripe accepted, in order. */
  accepted(): string[] {
    return this.requests.filter((r) => r.status === 200).map((r) => r.form.get('identifier') ?? '');
  }

  async stop(): Promise<void> {
    await this.#api?.close();
  }
}

describe('Stripe metered usage (SDK against a local Stripe API, real issuer, PostgreSQL)', () => {
  const logger = testLogger('billing-metered');
  const fake = new FakeStripe();
  const clock = new ManualClock(at('12:00'));
  const signer = new Stripe(SECRET_KEY);
  let database: TestDatabase;
  let issuer: RunningIssuer;
  let billing: Billing;
  let eventN = 0;
  // Metered (pro, customer from checkout), unmetered plan (enterprise), metered without customer.
  const tMetered = newId('tenant');
  const tUnmetered = newId('tenant');
  const tNoCustomer = newId('tenant');

  async function deliver(type: string, object: Record<string, unknown>): Promise<void> {
    const payload = JSON.stringify({
      id: `evt_metered_${++eventN}`,
      object: 'event',
      type,
      created: Math.floor(clock.now().getTime() / 1000),
      data: { object },
    });
    const signature = signer.webhooks.generateTestHeaderString({
      payload,
      secret: WEBHOOK_SECRET,
      timestamp: Math.floor(clock.now().getTime() / 1000),
    });
    await billing.client.handleWebhook({
      provider: 'stripe',
      payload: new TextEncoder().encode(payload),
      signature,
    });
  }

  async function customerOf(tenantId: string): Promise<string | null | undefined> {
    const row = await billing.service.database.db
      .selectFrom('subscriptions')
      .select('stripe_customer_id')
      .where('tenant_id', '=', tenantId)
      .executeTakeFirst();
    return row?.stripe_customer_id;
  }

  async function recorded(): Promise<{ tenant_id: string; day: string; value: string }[]> {
    return (
      await billing.service.database.db
        .selectFrom('metered_usage_reports')
        .select([
          'tenant_id',
          sql<string>`to_char(day, 'YYYY-MM-DD')`.as('day'),
          sql<string>`value::text`.as('value'),
        ])
        // The credentials meter's (the session meters' are the last test's).
        .where('meter', '=', 'credentials')
        .orderBy('day')
        .orderBy('tenant_id')
        .execute()
    ).filter((r) => [tMetered, tUnmetered, tNoCustomer].includes(r.tenant_id));
  }

  /** Credential rows straight into the issuer's table, one project per tenant and call. */
  function insertCredentials(rows: { tenant: string; issued: Date; expires: Date }[]): Promise<void> {
    const projects = new Map<string, string>();
    return insertIssuerCredentials(
      issuer.service,
      rows.map((r) => {
        const project = projects.get(r.tenant) ?? newId('project');
        projects.set(r.tenant, project);
        return { ...r, project };
      }),
    );
  }

  beforeAll(async () => {
    const apiBase = await fake.start();
    database = await createTestDatabase('billing_metered');
    issuer = await startIssuer({ databaseUrl: database.url, clock, kek: newKek() });
    const plans = structuredClone(DEFAULT_PLANS);
    plans.pro.stripePriceId = 'price_pro_monthly';
    plans.pro.stripeMeterEventName = EVENT_NAME;
    // Relay-session minutes and bytes sent billed through meters of their own; bytes received not.
    plans.pro.stripeUsageMeters = {
      session_minutes: 'relay_session_minutes',
      bytes_sent: 'relay_bytes_sent',
    };
    plans.enterprise.stripePriceId = 'price_enterprise_monthly';
    billing = await startBilling(
      {
        BILLING_DATABASE_URL: database.url,
        BILLING_PROVIDER: 'stripe',
        STRIPE_SECRET_KEY: SECRET_KEY,
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        STRIPE_API_BASE: apiBase,
      },
      { plans },
      // The job is run by the test (aggregateRecent), never by a timer.
      { clock, issuer: issuer.client, scheduler: new MemoryScheduler(logger) },
    );
    await insertCredentials([
      // DAY: 3 for the metered tenant, 1 each for the others; NEXT: 2 for the metered tenant.
      { tenant: tMetered, issued: at('09:00'), expires: at('09:10') },
      { tenant: tMetered, issued: at('10:00'), expires: at('10:10') },
      { tenant: tMetered, issued: at('11:00'), expires: at('11:10') },
      { tenant: tUnmetered, issued: at('09:00'), expires: at('09:10') },
      { tenant: tNoCustomer, issued: at('09:00'), expires: at('09:10') },
      { tenant: tMetered, issued: at('00:01', 1), expires: at('00:02', 1) },
      { tenant: tMetered, issued: at('00:02', 1), expires: at('00:03', 1) },
    ]);
  }, 60_000);

  afterAll(async () => {
    await billing?.close();
    await issuer?.stop();
    await fake.stop();
    await database?.drop();
  });

  it('stores the Stripe customer from a signed checkout.session.completed and subscription events', async () => {
    await deliver('checkout.session.completed', {
      id: 'cs_test_metered',
      object: 'checkout.session',
      client_reference_id: tMetered,
      customer: 'cus_Metered123',
      metadata: { tenant_id: tMetered, plan_id: 'pro' },
      status: 'complete',
      payment_status: 'paid',
    });
    expect(await customerOf(tMetered)).toBe('cus_Metered123');
    expect((await billing.client.getSubscription({ tenantId: tMetered })).subscription?.planId).toBe('pro');

    await deliver('customer.subscription.updated', {
      id: 'sub_unmetered',
      object: 'subscription',
      status: 'active',
      customer: 'cus_Unmetered456',
      metadata: { tenant_id: tUnmetered },
      items: { object: 'list', data: [{ id: 'si_1', price: { id: 'price_enterprise_monthly' } }] },
    });
    expect(await customerOf(tUnmetered)).toBe('cus_Unmetered456');
    expect((await billing.client.getSubscription({ tenantId: tUnmetered })).subscription?.planId).toBe(
      'enterprise',
    );

    // On the metered plan, but no Stripe customer known.
    await billing.client.setPlan({ tenantId: tNoCustomer, planId: 'pro' });
    expect(await customerOf(tNoCustomer)).toBeNull();
  });

  it('reports nothing for today', async () => {
    await billing.service.usage.aggregateRecent();
    expect((await billing.client.getUsage({ tenantId: tMetered, from: DAY, to: DAY })).days[0]).toMatchObject(
      {
        projectId: '',
        credentialsIssued: 3n,
      },
    );
    expect(fake.requests).toEqual([]);
    expect(await recorded()).toEqual([]);
  });

  it('records nothing when Stripe fails (500), and the next run reports the day', async () => {
    clock.set(at('00:05', 1));
    fake.fail = true;
    await billing.service.usage.aggregateRecent();
    expect(fake.requests.length).toBeGreaterThan(0);
    expect(fake.accepted()).toEqual([]);
    expect(await recorded()).toEqual([]);

    fake.fail = false;
    const before = fake.requests.length;
    await billing.service.usage.aggregateRecent();
    // Exactly one event, for the metered tenant's completed day; not NEXT (today).
    expect(fake.requests).toHaveLength(before + 1);
    const sent = fake.requests.at(-1)?.form as URLSearchParams;
    expect([...sent.keys()].sort()).toEqual(
      ['event_name', 'identifier', 'payload[stripe_customer_id]', 'payload[value]', 'timestamp'].sort(),
    );
    expect(sent.get('event_name')).toBe(EVENT_NAME);
    expect(sent.get('payload[stripe_customer_id]')).toBe('cus_Metered123');
    expect(sent.get('payload[value]')).toBe('3');
    expect(sent.get('identifier')).toBe(`${tMetered}:${DAY}`);
    expect(sent.get('timestamp')).toBe(String(Date.parse(`${DAY}T23:59:59Z`) / 1000));
    expect(await recorded()).toEqual([{ tenant_id: tMetered, day: DAY, value: '3' }]);
  });

  it('sends each completed day once however often the job runs; never today; nothing for unmetered plans or without a customer', async () => {
    await billing.service.usage.aggregateRecent();
    await Promise.all([billing.service.usage.aggregateRecent(), billing.service.usage.aggregateRecent()]);
    expect(fake.accepted()).toEqual([`${tMetered}:${DAY}`]);

    clock.set(at('00:01', 2));
    await billing.service.usage.aggregateRecent();
    await billing.service.usage.aggregateRecent();
    expect(fake.accepted()).toEqual([`${tMetered}:${DAY}`, `${tMetered}:${NEXT}`]);
    const last = fake.requests.at(-1)?.form as URLSearchParams;
    expect(last.get('payload[value]')).toBe('2');
    expect(last.get('timestamp')).toBe(String(Date.parse(`${NEXT}T23:59:59Z`) / 1000));
    expect(await recorded()).toEqual([
      { tenant_id: tMetered, day: DAY, value: '3' },
      { tenant_id: tMetered, day: NEXT, value: '2' },
    ]);
    // No event ever named the other tenants' customers or LAST (today).
    const identifiers = fake.requests.map((r) => r.form.get('identifier'));
    expect(identifiers.some((i) => i?.startsWith(tUnmetered) || i?.startsWith(tNoCustomer))).toBe(false);
    expect(identifiers).not.toContain(`${tMetered}:${LAST}`);
  });

  it('reports relay-session minutes and bytes to the meters the plan names: once per day and meter, minutes rounded up', async () => {
    const session = (n: number, ended: Date, extra: Record<string, number>) => ({
      id: n.toString(16).padStart(32, 'c'),
      relay_id: 'rly_00000000000000000000',
      tenant_id: tMetered,
      project_id: newId('project'),
      api_key_id: newId('apiKey'),
      jti: newId('session').replace('ses_', 'crd_'),
      kid: 'k',
      credential_iat: 0,
      transport: 'quic',
      remote: '',
      role: '',
      path: '/',
      grant_root: 'p',
      grant_publish: true,
      grant_subscribe: true,
      tier: 'pro',
      revalidate_seconds: 15,
      started_at: new Date(ended.getTime() - 60_000),
      last_seen_at: ended,
      grant_expires_at: ended,
      ended_at: ended,
      ...extra,
    });
    // LAST (today until now): two sessions, 61 s + 30.5 s and 1000 + 24 bytes sent.
    await issuer.service.database.db
      .insertInto('relay_sessions')
      .values([
        session(1, at('08:00', 2), { duration_seconds: 61, bytes_sent: 1000, bytes_received: 7 }),
        session(2, at('09:00', 2), { duration_seconds: 30.5, bytes_sent: 24, bytes_received: 0 }),
      ])
      .execute();
    clock.set(at('00:01', 3));
    const before = fake.requests.length;
    await billing.service.usage.aggregateRecent();
    await billing.service.usage.aggregateRecent();
    const sent = fake.requests.slice(before).map((r) => ({
      event: r.form.get('event_name'),
      identifier: r.form.get('identifier'),
      value: r.form.get('payload[value]'),
    }));
    // No credentials that day: nothing sent to the credentials meter (recorded all the same).
    expect(sent).toEqual([
      { event: 'relay_session_minutes', identifier: `${tMetered}:${LAST}:session_minutes`, value: '2' },
      { event: 'relay_bytes_sent', identifier: `${tMetered}:${LAST}:bytes_sent`, value: '1024' },
    ]);
    const rows = await billing.service.database.db
      .selectFrom('metered_usage_reports')
      .select(['meter', sql<string>`value::text`.as('value')])
      .where('tenant_id', '=', tMetered)
      .where('day', '=', LAST)
      .orderBy('meter')
      .execute();
    expect(rows).toEqual([
      { meter: 'bytes_sent', value: '1024' },
      { meter: 'credentials', value: '0' },
      { meter: 'session_minutes', value: '2' },
    ]);
  });
});
