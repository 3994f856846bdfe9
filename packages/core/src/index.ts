export { canonicalJson } from './canonical-json.js';
export type {
  AppliedCanonicalization,
  Canonicalization,
  SignedPayload,
  VerifyFailure,
  VerifyInput,
  VerifyOptions,
  VerifyResult,
  VerifySuccess,
} from './checksum.js';
export { computeChecksum, verifyChecksum } from './checksum.js';
export type { PayhookErrorCode, PayhookErrorDetail, PayhookErrorOptions } from './errors.js';
export { ERROR_STATUS, isPayhookError, PayhookError } from './errors.js';
export type {
  CandidateDifference,
  ChecksumAttempt,
  ChecksumCandidate,
  ChecksumExplanation,
} from './explain.js';
export { explainChecksumMismatch, formatMismatch } from './explain.js';
export type { LexicalOptions } from './lexical-canonical-json.js';
export { lexicalCanonicalJson } from './lexical-canonical-json.js';
