import { Page } from '../ui/kit.tsx';

export function Billing() {
  return <Page title="Billing">{null}</Page>;
}
