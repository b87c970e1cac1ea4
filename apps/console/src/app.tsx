/**
 * The console: the session gate, the router (every page a URL) and the pages, loaded on
 * demand so the first load carries only the shell and the page asked for.
 */
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ErrorBoundary, LocationProvider, lazy, Route, Router, useLocation } from 'preact-iso';
import { api, setCsrfToken, whenUnauthenticated } from './api.ts';
import { SignIn } from './pages/sign-in.tsx';
import { paths } from './routes.ts';
import { firstSession, loadSession, type Session, SessionCtx } from './session.tsx';
import { Busy, ErrorNote, Page } from './ui/kit.tsx';
import { Layout } from './ui/layout.tsx';

/** Each page's module, loaded on demand (so the first load carries the shell and one page). */
const load = {
  overview: () => import('./pages/overview.tsx'),
  projects: () => import('./pages/projects.tsx'),
  project: () => import('./pages/project.tsx'),
  webhook: () => import('./pages/project/webhook.tsx'),
  members: () => import('./pages/members.tsx'),
  audit: () => import('./pages/audit.tsx'),
  account: () => import('./pages/account.tsx'),
  billing: () => import('./pages/billing.tsx'),
  platform: () => import('./pages/platform.tsx'),
  activate: () => import('./pages/activate.tsx'),
};

const Overview = lazy(() => load.overview().then((m) => m.Overview));
const Projects = lazy(() => load.projects().then((m) => m.Projects));
const Project = lazy(() => load.project().then((m) => m.Project));
const Webhook = lazy(() => load.webhook().then((m) => m.Webhook));
const Members = lazy(() => load.members().then((m) => m.Members));
const Audit = lazy(() => load.audit().then((m) => m.Audit));
const Account = lazy(() => load.account().then((m) => m.Account));
const Billing = lazy(() => load.billing().then((m) => m.Billing));
const Relays = lazy(() => load.platform().then((m) => m.Relays));
const SigningKeys = lazy(() => load.platform().then((m) => m.SigningKeys));
const Tenants = lazy(() => load.platform().then((m) => m.Tenants));
const Activate = lazy(() => load.activate().then((m) => m.Activate));

/**
 * Starts loading the module of the page at `path` now, while the session is being read, instead
 * of after it (the router asks for the same module later and gets it from the module cache).
 */
export function prefetchPage(path: string): void {
  const first = path.split('/')[1] ?? '';
  const loader =
    path === '/'
      ? load.overview
      : first === 'projects'
        ? path === '/projects'
          ? load.projects
          : /^\/projects\/[^/]+\/webhooks\/[^/]+/.test(path)
            ? load.webhook
            : load.project
        : first === 'platform'
          ? load.platform
          : (load as Record<string, (() => Promise<unknown>) | undefined>)[first];
  loader?.().catch(() => {});
}

function NotFound() {
  return (
    <Page title="Not found">
      <p>
        There is no console page at this address. Go to the <a href={paths.overview}>overview</a>.
      </p>
    </Page>
  );
}

/** Where to go after signing in: the page asked for, if it is one of ours. */
export function nextOf(query: Record<string, string>): string {
  const next = query.next;
  return next?.startsWith('/') && !next.startsWith('//') ? next : paths.overview;
}

function Console() {
  const location = useLocation();
  const [session, setSession] = useState<Session | undefined | null>(null);
  const [failure, setFailure] = useState<unknown>();

  const refresh = useCallback(async () => {
    try {
      setSession(await loadSession());
      setFailure(undefined);
    } catch (e) {
      setFailure(e);
    }
  }, []);
  useEffect(() => {
    // The session read main.tsx started before the first render; later reads are refresh().
    firstSession().then(
      (s) => setSession(s),
      (e) => setFailure(e),
    );
    whenUnauthenticated(() => setSession(undefined));
  }, []);

  const signOut = useCallback(async () => {
    await api.POST('/admin/v1/auth/logout');
    setCsrfToken(undefined);
    setSession(undefined);
    location.route(paths.signIn);
  }, [location]);

  const publicPage = location.path === paths.signIn;
  useEffect(() => {
    if (session === undefined && !publicPage) {
      const here = location.url === '/' ? '' : `?next=${encodeURIComponent(location.url)}`;
      location.route(`${paths.signIn}${here}`, true);
    }
  }, [session, publicPage, location]);

  if (failure !== undefined && session === null) {
    return (
      <main id="main">
        <Page title="The console could not start">
          <ErrorNote error={failure} />
          <button type="button" onClick={() => void refresh()}>
            Try again
          </button>
        </Page>
      </main>
    );
  }
  if (session === null) return <Busy label="Loading…" />;
  if (publicPage || session === undefined) {
    return (
      <main id="main" class="narrow">
        <SignIn
          onSignedIn={async () => {
            await refresh();
            location.route(nextOf(location.query), true);
          }}
        />
      </main>
    );
  }
  return (
    <SessionCtx.Provider value={{ session, refresh, signOut }}>
      <Layout>
        <ErrorBoundary>
          <Router>
            <Route path={paths.overview} component={Overview} />
            <Route path={paths.activate} component={Activate} />
            <Route path={paths.projects} component={Projects} />
            <Route path="/projects/:id/webhooks/:webhook" component={Webhook} />
            <Route path="/projects/:id/:tab?" component={Project} />
            <Route path={paths.members} component={Members} />
            <Route path={paths.audit} component={Audit} />
            <Route path={paths.account} component={Account} />
            <Route path={paths.billing} component={Billing} />
            <Route path={paths.relays} component={Relays} />
            <Route path={paths.signingKeys} component={SigningKeys} />
            <Route path={paths.tenants} component={Tenants} />
            <Route default component={NotFound} />
          </Router>
        </ErrorBoundary>
      </Layout>
    </SessionCtx.Provider>
  );
}

export function App() {
  return (
    <LocationProvider>
      <Console />
    </LocationProvider>
  );
}
