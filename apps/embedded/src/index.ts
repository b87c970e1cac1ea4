export { banner } from './banner.ts';
export { Embedded, type EmbeddedInfo } from './embedded.ts';
