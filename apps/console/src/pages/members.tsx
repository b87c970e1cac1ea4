import { Page } from '../ui/kit.tsx';

export function Members() {
  return <Page title="Members">{null}</Page>;
}
