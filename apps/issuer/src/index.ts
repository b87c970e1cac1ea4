export { type IssuerConfig, loadOrCreateKek, readIssuerConfig } from './config.ts';
export { DEMO_RELAYS } from './relays/relay-config.ts';
export { type IssuerOverrides, IssuerService } from './service.ts';
