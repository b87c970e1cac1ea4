export { type AppDeps, buildApp, type GatewayApp } from './app.ts';
export { closeClients, connectClients, type GatewayClients } from './clients.ts';
export { type GatewayConfig, readGatewayConfig } from './config.ts';
export { type GatewayOverrides, GatewayService } from './service.ts';
