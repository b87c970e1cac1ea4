import { Page } from '../ui/kit.tsx';

export function Project() {
  return <Page title="Project">{null}</Page>;
}
