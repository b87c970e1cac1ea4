/**
 * The console: the session gate, the router (every page a URL) and the pages, loaded on
 * demand so the first load carries only the shell and the page asked for.
 */
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ErrorBoundary, LocationProvider, lazy, Route, Router, useLocation } from 'preact-iso';
import { api, setCsrfToken, whenUnauthenticated } from './api.ts';
import { SignIn } from './pages/sign-in.tsx';
import { paths } from './routes.ts';
import { loadSession, type Session, SessionCtx } from './session.tsx';
import { Busy, ErrorNote, Page } from './ui/kit.tsx';
import { Layout } from './ui/layout.tsx';

const Overview = lazy(() => import('./pages/overview.tsx').then((m) => m.Overview));
const Projects = lazy(() => import('./pages/projects.tsx').then((m) => m.Projects));
const Project = lazy(() => import('./pages/project.tsx').then((m) => m.Project));
const Webhook = lazy(() => import('./pages/project/webhook.tsx').then((m) => m.Webhook));
const Members = lazy(() => import('./pages/members.tsx').then((m) => m.Members));
const Audit = lazy(() => import('./pages/audit.tsx').then((m) => m.Audit));
const Account = lazy(() => import('./pages/account.tsx').then((m) => m.Account));
const Billing = lazy(() => import('./pages/billing.tsx').then((m) => m.Billing));
const Relays = lazy(() => import('./pages/platform.tsx').then((m) => m.Relays));
const SigningKeys = lazy(() => import('./pages/platform.tsx').then((m) => m.SigningKeys));
const Tenants = lazy(() => import('./pages/platform.tsx').then((m) => m.Tenants));
const Activate = lazy(() => import('./pages/activate.tsx').then((m) => m.Activate));

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
    void refresh();
    whenUnauthenticated(() => setSession(undefined));
  }, [refresh]);

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
