import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import type { BotRecord, ProjectRecord } from '../stores/records.ts';
import type { AdminDeps } from './deps.ts';
import type { Actor } from './principal.ts';

export const PROJECT_NOT_FOUND_MESSAGE = 'project not found';
export const API_KEY_NOT_FOUND_MESSAGE = 'API key not found';
export const ALLOWLIST_ENTRY_NOT_FOUND_MESSAGE = 'allowlist entry not found';

/**
 * The project in the actor's active tenant (and, for bots and identity tokens, their own
 * project). Another tenant's project answers exactly like a missing one (not_found), never
 * forbidden: the caller may not learn that it exists.
 */
export async function requireProject(
  deps: Pick<AdminDeps, 'projects'>,
  actor: Pick<Actor, 'tenantId' | 'projectId'>,
  projectId: string,
): Promise<ProjectRecord> {
  const reachable =
    isId('project', projectId) && (actor.projectId === undefined || actor.projectId === projectId);
  const project = reachable ? await deps.projects.find(actor.tenantId, projectId) : undefined;
  if (!project) throw new AppError('not_found', PROJECT_NOT_FOUND_MESSAGE);
  return project;
}

export const BOT_NOT_FOUND_MESSAGE = 'bot not found';
export const BOT_KEY_NOT_FOUND_MESSAGE = 'bot key not found';

/** The bot in the project; another project's or tenant's bot answers like a missing one. */
export async function requireBot(
  deps: Pick<AdminDeps, 'bots'>,
  project: ProjectRecord,
  botId: string,
  notFoundMessage = BOT_NOT_FOUND_MESSAGE,
): Promise<BotRecord> {
  const bot = isId('bot', botId) ? await deps.bots.find(project.tenantId, project.id, botId) : undefined;
  if (!bot) throw new AppError('not_found', notFoundMessage);
  return bot;
}
