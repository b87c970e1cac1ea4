import { Page } from '../ui/kit.tsx';

export function Overview() {
  return <Page title="Overview">{null}</Page>;
}
