import { Page } from '../ui/kit.tsx';

export function Projects() {
  return <Page title="Projects">{null}</Page>;
}
