export {
  type AdminConfig,
  BOOTSTRAP_PLANS,
  type BootstrapConfig,
  type BootstrapPlan,
  readAdminConfig,
} from './config.ts';
export { type AdminOverrides, AdminService } from './service.ts';
