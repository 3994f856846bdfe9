export { canonicalJson } from './canonical-json.js';
export type {
  AppliedCanonicalization,
  Canonicalization,
  SignedPayload,
  VerifyAsyncOptions,
  VerifyFailure,
  VerifyInput,
  VerifyOptions,
  VerifyResult,
  VerifySuccess,
} from './checksum.js';
export {
  computeChecksum,
  computeChecksumAsync,
  verifyChecksum,
  verifyChecksumAsync,
} from './checksum.js';
export type {
  SigningKeyPair,
  SigningPublicKey,
  SigningSecretKey,
  SignWebhookV1aInput,
  V1aSignatureHeaders,
} from './ed25519.js';
export {
  ED25519_SIGNATURE_BYTES,
  generateSigningKeyPair,
  generateSigningKeyPairAsync,
  parseSigningPublicKey,
  parseSigningSecretKey,
  SIGNING_PUBLIC_KEY_PREFIX,
  SIGNING_SECRET_KEY_PREFIX,
  signingPublicKeyOf,
  signingPublicKeyOfAsync,
  signV1a,
  signV1aAsync,
  signWebhookV1a,
  signWebhookV1aAsync,
} from './ed25519.js';
export { encodeEnvelope } from './envelope.js';
export type { PayhookErrorCode, PayhookErrorDetail, PayhookErrorOptions } from './errors.js';
export { ERROR_STATUS, isPayhookError, PayhookError } from './errors.js';
export type { EventIssue, ParseEventResult } from './events/parse-event.js';
export { isKnownEvent, isKnownEventName, parseEvent } from './events/parse-event.js';
export type {
  Address,
  BankAccountPaymentMethod,
  CardPaymentMethod,
  CryptoAddressPaymentMethod,
  Currency,
  Customer,
  CustomerInput,
  KnownPaymentMethod,
  Metadata,
  OrderItem,
  OtherPaymentMethod,
  Payment,
  PaymentMethod,
  PaymentStatus,
} from './events/schemas.js';
export {
  AddressSchema,
  BankAccountPaymentMethodSchema,
  CardPaymentMethodSchema,
  CryptoAddressPaymentMethodSchema,
  CurrencySchema,
  CustomerInputSchema,
  CustomerSchema,
  isKnownPaymentMethod,
  KNOWN_PAYMENT_METHOD_TYPES,
  MetadataSchema,
  OrderItemSchema,
  OtherPaymentMethodSchema,
  PaymentMethodSchema,
  PaymentSchema,
  PaymentStatusSchema,
} from './events/schemas.js';
export type {
  EventOf,
  KnownEvent,
  KnownEventMap,
  KnownEventName,
  PayhookEvent,
  PaymentSessionCreatedEvent,
  PaymentSessionFailedEvent,
  PaymentSessionSucceededEvent,
  UnknownEvent,
} from './events/types.js';
export { KNOWN_EVENTS } from './events/types.js';
export type {
  CandidateDifference,
  ChecksumAttempt,
  ChecksumCandidate,
  ChecksumExplanation,
  ExplainOptions,
} from './explain.js';
export {
  explainChecksumMismatch,
  explainChecksumMismatchAsync,
  explainSignature,
  formatMismatch,
} from './explain.js';
export type { SignatureExplanation } from './explain-signature.js';
export { formatSignatureExplanation } from './explain-signature.js';
export type { ClientIpInput, IpAllowList } from './ip.js';
export { createIpAllowList, normalizeIp, resolveClientIp } from './ip.js';
export type { LexicalOptions } from './lexical-canonical-json.js';
export { lexicalCanonicalJson } from './lexical-canonical-json.js';
export type { CryptoPath } from './platform.js';
export { runAfterResponse } from './receiver/after-response.js';
export { isJsonContentType } from './receiver/content-type.js';
export {
  createReceiver,
  DEFAULT_MAX_QUEUED_BYTES,
  DEFAULT_MAX_QUEUED_EVENTS,
} from './receiver/create-receiver.js';
export { errorResult, toPayhookError } from './receiver/framework-error.js';
export type { Logger } from './receiver/logger.js';
export { silentLogger, stderrLogger } from './receiver/logger.js';
export type {
  DeadLetteredEvent,
  HandledRun,
  ReceivedOutcome,
  ReceiverMetrics,
  ReceiverStats,
  RefusalReason,
  RetriedRun,
  StaleEvent,
} from './receiver/metrics.js';
export { REFUSAL_REASONS } from './receiver/metrics.js';
export type { NodeRequestMapping } from './receiver/node-request.js';
export { createNodeRequest } from './receiver/node-request.js';
export { defaultOrderKey, EVENT_RANKS } from './receiver/order-options.js';
export type { BodyStream } from './receiver/read-body.js';
export {
  DEFAULT_MAX_DRAIN_BYTES,
  defaultMaxDrainBytes,
  readRawBody,
  resolveMaxDrainBytes,
} from './receiver/read-body.js';
export type { RetryOptions } from './receiver/retry.js';
export { DEFAULT_RETRY, retryDelay } from './receiver/retry.js';
export type { TracerLike, TracingOption } from './receiver/tracing.js';
export type {
  DeadLetter,
  ErrorInfo,
  EventHandler,
  HandlerContext,
  ProcessedEvent,
  Receiver,
  ReceiverOptions,
  ReceiverRequest,
  ReceiverResult,
  ReplayResult,
  UnrecognizedEvent,
} from './receiver/types.js';
export type { WebhookPath } from './receiver/webhook-path.js';
export { createWebhookPath } from './receiver/webhook-path.js';
export { writeResponse } from './receiver/write-response.js';
export { encodeSignedEvent } from './signed-event.js';
export type { SigningKey } from './signing-secret.js';
export {
  generateSigningSecret,
  MIN_SIGNING_SECRET_BYTES,
  parseSigningSecret,
  SIGNING_SECRET_PREFIX,
} from './signing-secret.js';
export type { MemoryStoreOptions } from './store/memory-store.js';
export { createMemoryStore } from './store/memory-store.js';
export {
  checkMilliseconds,
  checkStoreTimes,
  DEFAULT_RETENTION_MS,
  type StoreTimeOptions,
  withStoreTimeout,
} from './store/store-helpers.js';
export type {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  ObjectLock,
  ObjectOrderStore,
  OrderedCompletion,
  RecoveredEvent,
  StoredEvent,
} from './store/types.js';
export type {
  ReceivedSignature,
  SignatureResult,
  SignatureSuccess,
  SignWebhookInput,
  VerifySignatureAsyncOptions,
  VerifySignatureOptions,
  WebhookSignatureHeaders,
} from './webhook-signature.js';
export {
  DEFAULT_SIGNATURE_TOLERANCE_SECONDS,
  readSignatureHeaders,
  signWebhook,
  verifyWebhookSignature,
  verifyWebhookSignatureAsync,
} from './webhook-signature.js';
