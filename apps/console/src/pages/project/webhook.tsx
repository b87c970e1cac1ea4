import { Page } from '../../ui/kit.tsx';

export function Webhook() {
  return <Page title="Webhook">{null}</Page>;
}
