import { Page } from '../ui/kit.tsx';

export const Relays = () => <Page title="Relays">{null}</Page>;
export const SigningKeys = () => <Page title="Signing keys">{null}</Page>;
export const Tenants = () => <Page title="Tenants">{null}</Page>;
