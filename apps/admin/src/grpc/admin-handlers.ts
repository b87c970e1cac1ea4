import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { addMember } from './add-member.ts';
import {
  createAuditCheckpoint,
  getAuditKeys,
  listAuditCheckpoints,
  listAuditEvents,
  recordAuditEvents,
  verifyAuditEvents,
} from './audit-events.ts';
import { authenticate } from './authenticate.ts';
import { changeMemberRole } from './change-member-role.ts';
import { changePassword } from './change-password.ts';
import { createAllowlistEntry } from './create-allowlist-entry.ts';
import { createApiKey } from './create-api-key.ts';
import { createBot } from './create-bot.ts';
import { createBotKey } from './create-bot-key.ts';
import { createProject } from './create-project.ts';
import { deleteAllowlistEntry } from './delete-allowlist-entry.ts';
import type { AdminDeps } from './deps.ts';
import { decideDeviceGrant } from './device-decide-grant.ts';
import { describeDeviceGrant } from './device-describe-grant.ts';
import { exchangeDeviceCode } from './device-exchange-code.ts';
import { startDeviceAuthorization } from './device-start-authorization.ts';
import { getProject } from './get-project.ts';
import { getTenant } from './get-tenant.ts';
import { createIdentityToken, listIdentityTokens, revokeIdentityToken } from './identity-tokens.ts';
import { listAllowlistEntries } from './list-allowlist-entries.ts';
import { listApiKeys } from './list-api-keys.ts';
import { listBotKeys } from './list-bot-keys.ts';
import { listBots } from './list-bots.ts';
import { listMembers } from './list-members.ts';
import { listMyTenants } from './list-my-tenants.ts';
import { listProjects } from './list-projects.ts';
import { listTenants } from './list-tenants.ts';
import { login } from './login.ts';
import { loginMfa } from './login-mfa.ts';
import { logout } from './logout.ts';
import {
  confirmTotpEnrollment,
  disableTotp,
  getMfaStatus,
  getTenantSettings,
  renewRecoveryCodes,
  startTotpEnrollment,
  updateTenantSettings,
} from './mfa.ts';
import { removeMember } from './remove-member.ts';
import { revokeApiKey } from './revoke-api-key.ts';
import { revokeBotKey } from './revoke-bot-key.ts';
import { listSessions, revokeOtherSessions, revokeSession } from './sessions.ts';
import { signup } from './signup.ts';
import { switchTenant } from './switch-tenant.ts';
import { verifyApiKey } from './verify-api-key.ts';
import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  getWebhookEndpoint,
  listWebhookDeliveries,
  listWebhookEndpoints,
  redeliverWebhook,
  rotateWebhookSecret,
  updateWebhookEndpoint,
} from './webhooks.ts';

export function adminHandlers(deps: AdminDeps): ServiceImpl<typeof AdminService> {
  return {
    signup: signup(deps),
    login: login(deps),
    loginMfa: loginMfa(deps),
    listAuditCheckpoints: listAuditCheckpoints(deps),
    createAuditCheckpoint: createAuditCheckpoint(deps),
    getAuditKeys: getAuditKeys(deps),
    startTotpEnrollment: startTotpEnrollment(deps),
    confirmTotpEnrollment: confirmTotpEnrollment(deps),
    disableTotp: disableTotp(deps),
    renewRecoveryCodes: renewRecoveryCodes(deps),
    getMfaStatus: getMfaStatus(deps),
    getTenantSettings: getTenantSettings(deps),
    updateTenantSettings: updateTenantSettings(deps),
    authenticate: authenticate(deps),
    logout: logout(deps),
    createProject: createProject(deps),
    listProjects: listProjects(deps),
    getProject: getProject(deps),
    createApiKey: createApiKey(deps),
    listApiKeys: listApiKeys(deps),
    revokeApiKey: revokeApiKey(deps),
    verifyApiKey: verifyApiKey(deps),
    createAllowlistEntry: createAllowlistEntry(deps),
    listAllowlistEntries: listAllowlistEntries(deps),
    deleteAllowlistEntry: deleteAllowlistEntry(deps),
    createWebhookEndpoint: createWebhookEndpoint(deps),
    listWebhookEndpoints: listWebhookEndpoints(deps),
    getWebhookEndpoint: getWebhookEndpoint(deps),
    updateWebhookEndpoint: updateWebhookEndpoint(deps),
    deleteWebhookEndpoint: deleteWebhookEndpoint(deps),
    rotateWebhookSecret: rotateWebhookSecret(deps),
    listWebhookDeliveries: listWebhookDeliveries(deps),
    redeliverWebhook: redeliverWebhook(deps),
    getTenant: getTenant(deps),
    listTenants: listTenants(deps),
    createBot: createBot(deps),
    listBots: listBots(deps),
    createBotKey: createBotKey(deps),
    listBotKeys: listBotKeys(deps),
    revokeBotKey: revokeBotKey(deps),
    switchTenant: switchTenant(deps),
    listMyTenants: listMyTenants(deps),
    listMembers: listMembers(deps),
    addMember: addMember(deps),
    changeMemberRole: changeMemberRole(deps),
    removeMember: removeMember(deps),
    createIdentityToken: createIdentityToken(deps),
    listIdentityTokens: listIdentityTokens(deps),
    revokeIdentityToken: revokeIdentityToken(deps),
    startDeviceAuthorization: startDeviceAuthorization(deps),
    exchangeDeviceCode: exchangeDeviceCode(deps),
    describeDeviceGrant: describeDeviceGrant(deps),
    decideDeviceGrant: decideDeviceGrant(deps),
    listAuditEvents: listAuditEvents(deps),
    verifyAuditEvents: verifyAuditEvents(deps),
    recordAuditEvents: recordAuditEvents(deps),
    listSessions: listSessions(deps),
    revokeSession: revokeSession(deps),
    revokeOtherSessions: revokeOtherSessions(deps),
    changePassword: changePassword(deps),
  };
}
