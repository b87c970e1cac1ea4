export { type IssuerConfig, loadOrCreateKek, readIssuerConfig } from './config.ts';
export { DEMO_RELAYS } from './relays/relay-config.ts';
export { IssuerApp, type IssuerOverrides } from './service.ts';
