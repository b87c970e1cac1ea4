import { packageConfig } from '../../vitest.shared.ts';

export default packageConfig(['src/**/*.test.ts']);
