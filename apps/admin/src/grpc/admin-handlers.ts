import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { authenticate } from './authenticate.ts';
import { createProject } from './create-project.ts';
import type { AdminDeps } from './deps.ts';
import { listProjects } from './list-projects.ts';
import { login } from './login.ts';
import { logout } from './logout.ts';
import { signup } from './signup.ts';

export function adminHandlers(deps: AdminDeps): ServiceImpl<typeof AdminService> {
  return {
    signup: signup(deps),
    login: login(deps),
    authenticate: authenticate(deps),
    logout: logout(deps),
    createProject: createProject(deps),
    listProjects: listProjects(deps),
  };
}
