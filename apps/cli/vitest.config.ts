import { packageConfig } from '../../vitest.shared.ts';

export default packageConfig();
