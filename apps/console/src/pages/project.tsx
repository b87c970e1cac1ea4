/**
 * One project: its name (`GET /admin/v1/projects/{id}`) and a tab bar (PROJECT_TABS), each tab a
 * URL, `/projects/:id/:tab?` (no tab: API keys).
 */
import type { FunctionComponent } from 'preact';
import { useRoute } from 'preact-iso';
import { api, must } from '../api.ts';
import { PROJECT_TABS, paths } from '../routes.ts';
import { Busy, ErrorNote, Page, useLoad } from '../ui/kit.tsx';
import { Allowlist } from './project/allowlist.tsx';
import { ApiKeys } from './project/api-keys.tsx';
import { Bots } from './project/bots.tsx';
import { Credentials } from './project/credentials.tsx';
import { IdentityTokens } from './project/identity-tokens.tsx';
import { Sessions } from './project/sessions.tsx';
import type { ProjectInfo, TabProps } from './project/tab.ts';
import { Webhooks } from './project/webhooks.tsx';
import '../ui/project.css';

export type { ProjectInfo, TabProps } from './project/tab.ts';

const TABS: Record<(typeof PROJECT_TABS)[number]['tab'], FunctionComponent<TabProps>> = {
  'api-keys': ApiKeys,
  credentials: Credentials,
  sessions: Sessions,
  bots: Bots,
  'identity-tokens': IdentityTokens,
  allowlist: Allowlist,
  webhooks: Webhooks,
};

/** A project of the active tenant by id (404 "project not found" for any other id). */
export function findProject(id: string): Promise<ProjectInfo> {
  return must(api.GET('/admin/v1/projects/{project_id}', { params: { path: { project_id: id } } }));
}

/** The project of the current URL, loaded once per id. */
export function useProject(id: string) {
  return useLoad(() => findProject(id), [id]);
}

export function Project() {
  const { params } = useRoute();
  const id = params.id ?? '';
  const tab = params.tab || 'api-keys';
  const loaded = useProject(id);
  // Moving from one project to another keeps this component: never show the previous one's data.
  const data = loaded.data?.id === id ? loaded.data : undefined;
  const current = PROJECT_TABS.find((t) => t.tab === tab);
  const Tab = current ? TABS[current.tab] : undefined;
  return (
    <Page title={data?.name ?? 'Project'}>
      <p class="prj-crumbs">
        <a href={paths.projects}>All projects</a>
        {data && (
          <>
            {' · '}
            <span class="muted">
              {data.environment} · <code>{data.id}</code>
            </span>
          </>
        )}
      </p>
      <nav class="tabs" aria-label="Project">
        {PROJECT_TABS.map((t) => (
          <a key={t.tab} href={paths.project(id, t.tab)} aria-current={t.tab === tab ? 'page' : undefined}>
            {t.label}
          </a>
        ))}
      </nav>
      {loaded.loading && !data && <Busy label="Loading the project…" />}
      <ErrorNote error={loaded.error} />
      {!Tab && (
        <p class="notice error" role="alert">
          This project has no tab “{tab}”. Choose one of the tabs above.
        </p>
      )}
      {Tab && data && <Tab key={`${id}/${tab}`} project={data} />}
    </Page>
  );
}
