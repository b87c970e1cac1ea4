import { Receiver } from '@relayplane/testing/webhook-receiver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcessCli } from './support/cli.ts';
import { type Stack, startStack } from './support/stack.ts';
import { tenant } from './support/tenant.ts';

/** `relayplane webhooks` (issue 34) against the real services, delivering to a local receiver. */
describe('the CLI: relayplane webhooks', () => {
  let stack: Stack;
  const receiver = new Receiver();

  beforeAll(async () => {
    await receiver.listen();
    stack = await startStack('gw_cli_webhooks', {
      adminEnv: { RELAYPLANE_WEBHOOKS_ALLOW_HTTP_LOOPBACK: 'true' },
    });
  });
  const cli = inProcessCli(() => stack.app, 'webhooks');
  afterAll(async () => {
    await stack?.close();
    await receiver.close();
  });

  it('lists, creates (secret once), shows deliveries, redelivers, rotates and deletes', async () => {
    const t = await tenant(stack, { email: 'cli-webhooks@example.test', name: 'CLI webhooks' });
    const projectId = await t.project('live');
    const empty = await cli(['webhooks', 'list', projectId], t.token);
    expect(empty.code, empty.stderr).toBe(0);
    expect(empty.stdout).toContain(`No webhook endpoints in ${projectId}`);

    const made = await cli(
      [
        'webhooks',
        'create',
        projectId,
        '--url',
        receiver.url('/cli'),
        '--event',
        'api_key.created',
        '--json',
      ],
      t.token,
    );
    expect(made.code, made.stderr).toBe(0);
    expect(made.stderr).toContain('shown only once');
    const { webhook, secret } = JSON.parse(made.stdout);
    expect(secret).toMatch(/^whsec_/);
    expect(webhook).toMatchObject({ url: receiver.url('/cli'), events: ['api_key.created'], enabled: true });

    const table = await cli(['webhooks', 'list', projectId], t.token);
    expect(table.stdout).toContain(webhook.id);
    expect(table.stdout).not.toContain(secret);

    await t.apiKey(projectId, {});
    await receiver.until(() => receiver.at('/cli').length >= 1);
    let deliveries: { id: string; status: string }[] = [];
    await expect
      .poll(async () => {
        const out = await cli(['webhooks', 'deliveries', projectId, webhook.id, '--json'], t.token);
        deliveries = JSON.parse(out.stdout).deliveries;
        return deliveries.map((d) => d.status);
      })
      .toEqual(['succeeded']);
    const log = await cli(['webhooks', 'deliveries', projectId, webhook.id], t.token);
    expect(log.stdout).toContain('api_key.created');
    expect(log.stdout).toContain('succeeded');

    const redelivered = await cli(
      ['webhooks', 'redeliver', projectId, webhook.id, deliveries[0]?.id ?? ''],
      t.token,
    );
    expect(redelivered.code, redelivered.stderr).toBe(0);
    expect(redelivered.stdout).toMatch(
      /^Queued msg_[0-9a-z]{20} \(api_key\.created\) again as delivery dlv_/,
    );
    await receiver.until(() => receiver.at('/cli').length >= 2);
    expect(receiver.at('/cli')[1]?.headers['webhook-id']).toBe(receiver.at('/cli')[0]?.headers['webhook-id']);

    const rotated = await cli(['webhooks', 'rotate-secret', projectId, webhook.id, '--grace', '60'], t.token);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stdout).toMatch(/Signing secret \(shown only once\):\s+whsec_/);
    expect(rotated.stdout).toContain('Previous secret signs until');

    const bad = await cli(
      ['webhooks', 'create', projectId, '--url', 'https://10.0.0.1/x', '--event', 'plan.changed'],
      t.token,
    );
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('url: ');

    const gone = await cli(['webhooks', 'delete', projectId, webhook.id], t.token);
    expect(gone.code, gone.stderr).toBe(0);
    expect(gone.stdout).toBe(`Deleted webhook endpoint ${webhook.id}.\n`);
    const missing = await cli(['webhooks', 'delete', projectId, webhook.id], t.token);
    expect(missing.code).toBe(5);
    expect(missing.stderr).toContain('no webhook endpoint has this id in the project');
  });
});
