import { packageConfig } from '../../vitest.shared.ts';

// The harness's own tests (src/) and the integration tests of @relayplane/shared (tests/shared/):
// testing depends on shared and never the reverse, so shared's tests that need the harness or a
// real transport (PostgreSQL, Redis, gRPC, HTTP) live here.
export default packageConfig();
