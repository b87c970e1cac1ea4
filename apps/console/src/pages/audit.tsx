import { Page } from '../ui/kit.tsx';

export function Audit() {
  return <Page title="Audit">{null}</Page>;
}
