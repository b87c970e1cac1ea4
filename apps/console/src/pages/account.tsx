import { Page } from '../ui/kit.tsx';

export function Account() {
  return <Page title="Account">{null}</Page>;
}
