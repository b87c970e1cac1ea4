import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['../packages/testing/src/global-setup.ts'],
    include: ['e2e/**/*.test.ts', 'rollout/**/*.test.ts', 'bench/**/*.test.ts', 'soak/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Each file boots whole systems; one at a time on a 2-core machine.
    fileParallelism: false,
  },
});
