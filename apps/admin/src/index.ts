export { ensureAuditKeyFile } from './audit/checkpoint-key.ts';
export { type AdminConfig, type BootstrapConfig, readAdminConfig } from './config.ts';
export { type AdminOverrides, AdminService } from './service.ts';
