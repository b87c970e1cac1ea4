export { buildApp, type GatewayApp } from './app.ts';
export { closeClients, connectClients, type GatewayClients } from './clients.ts';
export { type GatewayConfig, readGatewayConfig } from './config.ts';
export { GatewayContext } from './context.ts';
export { type GatewayOverrides, GatewayService } from './service.ts';
