import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['../packages/testing/src/global-setup.ts'],
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
