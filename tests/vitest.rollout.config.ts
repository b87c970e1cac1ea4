import { defineConfig } from 'vitest/config';

// `pnpm rollout`: the rolling restart under load on its own (it also runs in `pnpm test`,
// vitest.config.ts). Same setup as the e2e suite.
export default defineConfig({
  test: {
    globalSetup: ['../packages/testing/src/global-setup.ts'],
    include: ['rollout/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
  },
});
