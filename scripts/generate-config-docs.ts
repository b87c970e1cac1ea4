/**
 * `pnpm docs:config`: the per-app tables of docs/configuration.md, rendered from the settings each
 * app declares (apps/<app>/src/settings.ts), between `<!-- config:<app>:start -->` and
 * `<!-- config:<app>:end -->`. The prose around them is written by hand. CI runs it and fails when
 * the page differs from what is committed (.ci/run).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_SETTINGS } from '../apps/admin/src/settings.ts';
import { BILLING_SETTINGS } from '../apps/billing/src/settings.ts';
import { GATEWAY_SETTINGS } from '../apps/gateway/src/settings.ts';
import { ISSUER_SETTINGS } from '../apps/issuer/src/settings.ts';
import { type Setting, settingsTable } from '../packages/shared/src/settings.ts';

const PAGE = join(import.meta.dirname, '..', 'docs', 'configuration.md');
const APPS: Record<string, readonly Setting[]> = {
  gateway: GATEWAY_SETTINGS,
  issuer: ISSUER_SETTINGS,
  admin: ADMIN_SETTINGS,
  billing: BILLING_SETTINGS,
};

let page = readFileSync(PAGE, 'utf8');
for (const [app, settings] of Object.entries(APPS)) {
  const start = `<!-- config:${app}:start -->`;
  const end = `<!-- config:${app}:end -->`;
  const from = page.indexOf(start);
  const to = page.indexOf(end);
  if (from < 0 || to < from) throw new Error(`docs/configuration.md has no ${start} … ${end} block`);
  page = `${page.slice(0, from + start.length)}\n${settingsTable(settings)}\n${page.slice(to)}`;
}
writeFileSync(PAGE, page);
console.log(`wrote ${PAGE}`);
