/**
 * Which service may call which RPC (issue 19): the one table, by full method name. With mutual
 * TLS on, a server answers PERMISSION_DENIED to a peer whose SPIFFE identity is not listed for
 * the method it calls (logged and counted by `rpc.ts`); plaintext has no identities and no
 * checks. Every RPC of every service in @relayplane/proto must be here: `RpcServer.add` refuses
 * a service with an undeclared method, and a test walks the generated code. docs/ARCHITECTURE.md
 * holds `renderRpcMatrix()`'s table, checked by a test.
 *
 * Least privilege, from who calls what today: the gateway is the public API and calls nearly
 * everything; admin reads entitlements and sets the bootstrap tenant's plan; billing reads the
 * issuer's usage summaries; issuer and billing deliver their audit outboxes to admin. The issuer
 * calls no RPC of another service but RecordAuditEvents.
 */
import type { DescMethod } from '@bufbuild/protobuf';
import type { ServiceName } from '@relayplane/contract/contract';

/** Any peer whose certificate passed the handshake (chained to the CA): the health service. */
export const ANY_PEER = 'any authenticated peer';

export type Callers = readonly ServiceName[] | typeof ANY_PEER;

const GATEWAY = ['gateway'] as const;

/** `<package>.<Service>/<Method>` → the services that may call it. */
export const RPC_CALLERS: Readonly<Record<string, Callers>> = {
  // grpc.health.v1: readiness checks (the gateway's /readyz, probes with a certificate).
  'grpc.health.v1.Health/Check': ANY_PEER,
  'grpc.health.v1.Health/Watch': ANY_PEER,

  'relayplane.issuer.v1.IssuerService/GetJwks': GATEWAY,
  'relayplane.issuer.v1.IssuerService/ListSigningKeys': GATEWAY,
  'relayplane.issuer.v1.IssuerService/RotateSigningKeys': GATEWAY,
  'relayplane.issuer.v1.IssuerService/RevokeSigningKey': GATEWAY,
  'relayplane.issuer.v1.IssuerService/IssueCredential': GATEWAY,
  'relayplane.issuer.v1.IssuerService/IssueCredentials': GATEWAY,
  'relayplane.issuer.v1.IssuerService/IssueCredentialBatches': GATEWAY,
  'relayplane.issuer.v1.IssuerService/RevokeCredential': GATEWAY,
  'relayplane.issuer.v1.IssuerService/IntrospectCredential': GATEWAY,
  'relayplane.issuer.v1.IssuerService/ListRevocations': GATEWAY,
  'relayplane.issuer.v1.IssuerService/RevokeCredentials': GATEWAY,
  'relayplane.issuer.v1.IssuerService/ListCredentials': GATEWAY,
  'relayplane.issuer.v1.IssuerService/RegisterRelay': GATEWAY,
  'relayplane.issuer.v1.IssuerService/ListRelays': GATEWAY,
  'relayplane.issuer.v1.IssuerService/DeleteRelay': GATEWAY,
  'relayplane.issuer.v1.IssuerService/AuthenticateRelay': GATEWAY,
  'relayplane.issuer.v1.IssuerService/Heartbeat': GATEWAY,
  'relayplane.issuer.v1.IssuerService/AssignRelays': GATEWAY,
  'relayplane.issuer.v1.IssuerService/DecideRelaySession': GATEWAY,
  'relayplane.issuer.v1.IssuerService/EndRelaySession': GATEWAY,
  'relayplane.issuer.v1.IssuerService/ListRelaySessions': GATEWAY,
  'relayplane.issuer.v1.IssuerService/GetTenantConnections': GATEWAY,
  'relayplane.issuer.v1.IssuerService/SummarizeUsage': ['billing'],

  'relayplane.billing.v1.BillingService/ListPlans': GATEWAY,
  'relayplane.billing.v1.BillingService/GetPricing': GATEWAY,
  'relayplane.billing.v1.BillingService/GetSubscription': GATEWAY,
  'relayplane.billing.v1.BillingService/GetSubscriptions': GATEWAY,
  'relayplane.billing.v1.BillingService/SetPlan': ['gateway', 'admin'],
  'relayplane.billing.v1.BillingService/GetEntitlements': ['gateway', 'admin'],
  'relayplane.billing.v1.BillingService/CreateCheckoutSession': GATEWAY,
  'relayplane.billing.v1.BillingService/GetCheckoutSession': GATEWAY,
  'relayplane.billing.v1.BillingService/CompleteCheckoutSession': GATEWAY,
  'relayplane.billing.v1.BillingService/HandleWebhook': GATEWAY,
  'relayplane.billing.v1.BillingService/GetUsage': GATEWAY,

  'relayplane.admin.v1.AdminService/Signup': GATEWAY,
  'relayplane.admin.v1.AdminService/Login': GATEWAY,
  'relayplane.admin.v1.AdminService/LoginMfa': GATEWAY,
  'relayplane.admin.v1.AdminService/ListAuditCheckpoints': GATEWAY,
  'relayplane.admin.v1.AdminService/CreateAuditCheckpoint': GATEWAY,
  'relayplane.admin.v1.AdminService/GetAuditKeys': GATEWAY,
  'relayplane.admin.v1.AdminService/StartTotpEnrollment': GATEWAY,
  'relayplane.admin.v1.AdminService/ConfirmTotpEnrollment': GATEWAY,
  'relayplane.admin.v1.AdminService/DisableTotp': GATEWAY,
  'relayplane.admin.v1.AdminService/RenewRecoveryCodes': GATEWAY,
  'relayplane.admin.v1.AdminService/GetMfaStatus': GATEWAY,
  'relayplane.admin.v1.AdminService/GetTenantSettings': GATEWAY,
  'relayplane.admin.v1.AdminService/UpdateTenantSettings': GATEWAY,
  'relayplane.admin.v1.AdminService/Authenticate': GATEWAY,
  'relayplane.admin.v1.AdminService/Logout': GATEWAY,
  'relayplane.admin.v1.AdminService/CreateProject': GATEWAY,
  'relayplane.admin.v1.AdminService/ListProjects': GATEWAY,
  'relayplane.admin.v1.AdminService/GetProject': GATEWAY,
  'relayplane.admin.v1.AdminService/CreateApiKey': GATEWAY,
  'relayplane.admin.v1.AdminService/ListApiKeys': GATEWAY,
  'relayplane.admin.v1.AdminService/RevokeApiKey': GATEWAY,
  'relayplane.admin.v1.AdminService/VerifyApiKey': GATEWAY,
  'relayplane.admin.v1.AdminService/CreateAllowlistEntry': GATEWAY,
  'relayplane.admin.v1.AdminService/ListAllowlistEntries': GATEWAY,
  'relayplane.admin.v1.AdminService/DeleteAllowlistEntry': GATEWAY,
  'relayplane.admin.v1.AdminService/CreateWebhookEndpoint': GATEWAY,
  'relayplane.admin.v1.AdminService/ListWebhookEndpoints': GATEWAY,
  'relayplane.admin.v1.AdminService/GetWebhookEndpoint': GATEWAY,
  'relayplane.admin.v1.AdminService/UpdateWebhookEndpoint': GATEWAY,
  'relayplane.admin.v1.AdminService/DeleteWebhookEndpoint': GATEWAY,
  'relayplane.admin.v1.AdminService/RotateWebhookSecret': GATEWAY,
  'relayplane.admin.v1.AdminService/ListWebhookDeliveries': GATEWAY,
  'relayplane.admin.v1.AdminService/RedeliverWebhook': GATEWAY,
  'relayplane.admin.v1.AdminService/GetTenant': GATEWAY,
  'relayplane.admin.v1.AdminService/ListTenants': GATEWAY,
  'relayplane.admin.v1.AdminService/CreateBot': GATEWAY,
  'relayplane.admin.v1.AdminService/ListBots': GATEWAY,
  'relayplane.admin.v1.AdminService/CreateBotKey': GATEWAY,
  'relayplane.admin.v1.AdminService/ListBotKeys': GATEWAY,
  'relayplane.admin.v1.AdminService/RevokeBotKey': GATEWAY,
  'relayplane.admin.v1.AdminService/SwitchTenant': GATEWAY,
  'relayplane.admin.v1.AdminService/ListMyTenants': GATEWAY,
  'relayplane.admin.v1.AdminService/ListMembers': GATEWAY,
  'relayplane.admin.v1.AdminService/AddMember': GATEWAY,
  'relayplane.admin.v1.AdminService/ChangeMemberRole': GATEWAY,
  'relayplane.admin.v1.AdminService/RemoveMember': GATEWAY,
  'relayplane.admin.v1.AdminService/CreateIdentityToken': GATEWAY,
  'relayplane.admin.v1.AdminService/ListIdentityTokens': GATEWAY,
  'relayplane.admin.v1.AdminService/RevokeIdentityToken': GATEWAY,
  'relayplane.admin.v1.AdminService/StartDeviceAuthorization': GATEWAY,
  'relayplane.admin.v1.AdminService/ExchangeDeviceCode': GATEWAY,
  'relayplane.admin.v1.AdminService/DescribeDeviceGrant': GATEWAY,
  'relayplane.admin.v1.AdminService/DecideDeviceGrant': GATEWAY,
  'relayplane.admin.v1.AdminService/ListAuditEvents': GATEWAY,
  'relayplane.admin.v1.AdminService/VerifyAuditEvents': GATEWAY,
  'relayplane.admin.v1.AdminService/RecordAuditEvents': ['issuer', 'billing'],
  'relayplane.admin.v1.AdminService/ListSessions': GATEWAY,
  'relayplane.admin.v1.AdminService/RevokeSession': GATEWAY,
  'relayplane.admin.v1.AdminService/RevokeOtherSessions': GATEWAY,
  'relayplane.admin.v1.AdminService/ChangePassword': GATEWAY,
};

/** `relayplane.issuer.v1.IssuerService/IssueCredentials`: the matrix's key and the metric's `method` label. */
export function methodName(method: DescMethod): string {
  return `${method.parent.typeName}/${method.name}`;
}

/** Who may call `method`; undefined when the matrix does not declare it (nobody, then). */
export function callersOf(method: DescMethod): Callers | undefined {
  return Object.hasOwn(RPC_CALLERS, methodName(method)) ? RPC_CALLERS[methodName(method)] : undefined;
}

/** The matrix as the Markdown table docs/ARCHITECTURE.md holds (one row per RPC, by service). */
export function renderRpcMatrix(): string {
  const rows = Object.entries(RPC_CALLERS).map(([name, callers]) => {
    const [service = '', method = ''] = name.split('/');
    const shortService = service.slice(service.lastIndexOf('.') + 1);
    const who = callers === ANY_PEER ? `any authenticated peer` : callers.join(', ');
    return `| ${shortService} | ${method} | ${who} |`;
  });
  return ['| service | RPC | may be called by |', '|---|---|---|', ...rows].join('\n');
}
