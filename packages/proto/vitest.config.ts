import { defineConfig } from 'vitest/config';

// The bridge needs no storage: no global setup here (and no dependency cycle through @relayplane/testing).
export default defineConfig({ test: { include: ['tests/**/*.test.ts'], testTimeout: 30_000 } });
