import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/** The one vitest setup every package uses: real PostgreSQL/Redis from the global setup, no skips. */
export function packageConfig(include: string[] = ['src/**/*.test.ts', 'tests/**/*.test.ts']) {
  return defineConfig({
    test: {
      globalSetup: [fileURLToPath(new URL('./packages/testing/src/global-setup.ts', import.meta.url))],
      include,
      testTimeout: 30_000,
      hookTimeout: 60_000,
      pool: 'forks',
      maxWorkers: 2,
    },
  });
}
