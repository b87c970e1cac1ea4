export type { CredentialMode, VerifiedCredential } from './claims.ts';
export { VerificationError, type VerificationErrorCode } from './errors.ts';
export {
  createVerifier,
  type Verifier,
  type VerifierMetrics,
  type VerifierOptions,
  type VerifyOptions,
} from './verifier.ts';
