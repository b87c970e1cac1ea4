/** The signed-in frame: skip link, header with the tenant switcher and account, navigation. */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { api, errorText, must } from '../api.ts';
import { paths } from '../routes.ts';
import { useSession } from '../session.tsx';

type Membership = { tenant: { id: string; name: string }; role: string; active: boolean };

function TenantSwitcher() {
  const { session, refresh } = useSession();
  const { route } = useLocation();
  const [tenants, setTenants] = useState<Membership[]>([]);
  const [error, setError] = useState<string>();
  useEffect(() => {
    must(api.GET('/admin/v1/auth/tenants')).then(
      (body) => setTenants(body.tenants),
      () => setTenants([]),
    );
  }, [session.tenant.id]);
  if (tenants.length < 2) return <span class="tenant-name">{session.tenant.name}</span>;
  const change = async (tenantId: string) => {
    setError(undefined);
    try {
      await must(api.POST('/admin/v1/auth/session/tenant', { body: { tenant_id: tenantId } }));
      await refresh();
      route(paths.overview);
    } catch (e) {
      setError(errorText(e));
    }
  };
  return (
    <span class="tenant-switcher">
      <label for="tenant-switch" class="visually-hidden">
        Tenant
      </label>
      <select
        id="tenant-switch"
        value={session.tenant.id}
        onChange={(e) => void change(e.currentTarget.value)}
      >
        {tenants.map((m) => (
          <option key={m.tenant.id} value={m.tenant.id}>
            {m.tenant.name} ({m.role})
          </option>
        ))}
      </select>
      {error && (
        <span class="error" role="alert">
          {error}
        </span>
      )}
    </span>
  );
}

function NavLink({ href, children, exact }: { href: string; children: ComponentChildren; exact?: boolean }) {
  const { path } = useLocation();
  const current = exact ? path === href : path === href || path.startsWith(`${href}/`);
  return (
    <a href={href} aria-current={current ? 'page' : undefined}>
      {children}
    </a>
  );
}

export function Layout({ children }: { children: ComponentChildren }) {
  const { session, signOut } = useSession();
  const { path } = useLocation();
  useEffect(() => {
    // A new page: move focus to its heading so keyboard and screen-reader users start there.
    const heading = document.getElementById('page-title');
    if (heading && document.activeElement === document.body) heading.focus({ preventScroll: true });
  }, [path]);
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={paths.overview}>
          Relayplane
        </a>
        <TenantSwitcher />
        <span class="spacer" />
        <span class="who">
          {session.user.email} · {session.role}
        </span>
        <button type="button" class="secondary small" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <nav class="side" aria-label="Console">
        <NavLink href={paths.overview} exact>
          Overview
        </NavLink>
        <NavLink href={paths.projects}>Projects</NavLink>
        <NavLink href={paths.members}>Members</NavLink>
        <NavLink href={paths.audit}>Audit log</NavLink>
        <NavLink href={paths.billing}>Billing</NavLink>
        <NavLink href={paths.account}>Account</NavLink>
        {session.user.platform_admin && (
          <>
            <span class="nav-group" aria-hidden="true">
              Platform
            </span>
            <NavLink href={paths.relays}>Relays</NavLink>
            <NavLink href={paths.signingKeys}>Signing keys</NavLink>
            <NavLink href={paths.tenants}>Tenants</NavLink>
          </>
        )}
      </nav>
      <main id="main">{children}</main>
    </>
  );
}
