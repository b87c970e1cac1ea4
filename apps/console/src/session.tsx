/**
 * Who is signed in: the API's session (user, active tenant, role, permissions) and its CSRF
 * token, read from GET /admin/v1/auth/session on load and after sign-in. Nothing is stored in
 * the browser beyond the HttpOnly cookie the API sets.
 */
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { api, type components, must, setCsrfToken } from './api.ts';

export type Session = components['schemas']['Session'];

export interface SessionContext {
  session: Session;
  /** Reads the session again (after a tenant switch or a role change). */
  refresh: () => Promise<void>;
  signOut: () => Promise<void>;
}

export const SessionCtx = createContext<SessionContext | undefined>(undefined);

export function useSession(): SessionContext {
  const ctx = useContext(SessionCtx);
  if (!ctx) throw new Error('useSession outside a signed-in page');
  return ctx;
}

/** The permission check the pages use to hide what the role cannot do (the API decides). */
export function can(session: Session, permission: string): boolean {
  return session.permissions.includes(permission);
}

/** The current user session, or undefined when signed out (401). */
export async function loadSession(): Promise<Session | undefined> {
  const { data, response } = await api.GET('/admin/v1/auth/session');
  if (response.status === 401) {
    setCsrfToken(undefined);
    return undefined;
  }
  if (!response.ok || !data) {
    await must(Promise.resolve({ data, response, error: await safeJson(response) }));
    return undefined;
  }
  if (!('user' in data)) return undefined;
  const session = data as Session;
  setCsrfToken(session.csrf_token);
  return session;
}

async function safeJson(response: Response): Promise<unknown> {
  try {
    return await response.clone().json();
  } catch {
    return undefined;
  }
}

let first: Promise<Session | undefined> | undefined;

/**
 * The session read at start: begun by main.tsx before the first render (not after the first
 * paint, as an effect would), answered once.
 */
export function firstSession(): Promise<Session | undefined> {
  first ??= loadSession();
  return first;
}
