export {
  type AdminConfig,
  BOOTSTRAP_PLANS,
  type BootstrapConfig,
  type BootstrapPlan,
  readAdminConfig,
} from './config.ts';
export { API_KEYS_REVOKED_CHANNEL } from './domain/api-keys.ts';
export { type AdminOverrides, AdminService } from './service.ts';
