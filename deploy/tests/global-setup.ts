import { ensureHelm } from './support/helm.ts';

export default function setup(): void {
  ensureHelm();
}
