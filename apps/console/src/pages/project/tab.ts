/** What every tab of a project page receives (project.tsx renders the tab of the URL). */
import type { components } from '../../api.ts';

export type ProjectInfo = components['schemas']['Project'];

export interface TabProps {
  project: ProjectInfo;
}
