export type { CredentialMode, VerifiedCredential } from './claims.ts';
export { VerificationError, type VerificationErrorCode } from './errors.ts';
export { authorizePath, type PathAuthorization } from './paths.ts';
export {
  createVerifier,
  type Verifier,
  type VerifierMetrics,
  type VerifierOptions,
  type VerifyOptions,
} from './verifier.ts';
