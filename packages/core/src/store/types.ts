/**
 * The idempotency store contract (docs/design.md, "Work queue and store contract"). The memory store,
 * the Redis store and the PostgreSQL store implement it, and one conformance suite runs against all.
 *
 * An event moves through these states under its key (business id + lower-cased checksum):
 * - `processing`: claimed by an owner under a lease; while the lease is live, duplicates are
 *   acknowledged and not processed again; when it lapses (the owner died), `recover` or a new
 *   delivery claims it again;
 * - `done`: a tombstone kept for the retention, so duplicates and replays are refused;
 * - `failed`: the handler failed after its local retries; payload and error are kept, and a
 *   redelivery or `replay` claims it again.
 */
export interface IdempotencyStore {
  /**
   * Atomically claims `key` for `owner` under a lease of `leaseMs`, recording the verified payload
   * in the same step. Claims an unknown key, a failed one, or one whose lease lapsed; refuses
   * (`duplicate`) one that is done or held under a live lease, by any owner, this one included:
   * of any number of concurrent claims of one key exactly one is `claimed`.
   */
  claim(key: string, claim: ClaimRequest): Promise<ClaimResult>;
  /** Extends the lease of a key this owner holds; false if it no longer holds it. */
  renew(key: string, owner: string, leaseMs: number): Promise<boolean>;
  /** Marks a held key done (a tombstone kept for the retention); false if the owner lost it. */
  complete(key: string, owner: string): Promise<boolean>;
  /** Marks a held key failed, keeping payload and error for replay; false if the owner lost it. */
  fail(key: string, owner: string, error: string): Promise<boolean>;
  /** Claims for `owner` up to `limit` keys whose lease lapsed without completion. */
  recover(owner: string, leaseMs: number, limit: number): Promise<RecoveredEvent[]>;
  /** Reads a key's record (for replay and diagnostics). */
  get(key: string): Promise<StoredEvent | undefined>;
  /**
   * The lease a receiver uses with this store when it sets none itself (`leaseMs` of
   * `createReceiver` wins); 30 s when neither says.
   */
  readonly leaseMs?: number;
  /** Releases what the store opened itself (never a client the caller passed in). */
  close?(): Promise<void>;
  /**
   * Optional: per-object order (docs/design.md, "Per-object order"). A store that has it lets
   * the receiver run the events of one object (a payment session) one at a time across every
   * instance, and skip an event older in the object's lifecycle than one already handled. A
   * store without it still works; its receiver processes events unordered, and says so at
   * creation. A store that has it passes `describeOrderContract` of `@payhook/core/testing`. An
   * ordered event is marked done through `order.complete`, not `complete`: a wrapper around a
   * store that overrides `complete` must wrap `order.complete` too.
   */
  readonly order?: ObjectOrderStore;
  /**
   * Optional: a store that lives in the database of the handlers' own effects runs each attempt of
   * an event's handlers in one of its transactions (docs/stores.md). It opens the transaction,
   * calls `run` with it (the receiver hands it to the handlers as `context.transaction`), then, in
   * the same transaction, marks `key` done if `owner` still holds it, and commits: the handlers'
   * writes and the done mark commit together or not at all. Resolves true once committed; false if
   * `owner` no longer held the key (the transaction is rolled back, another instance has the
   * event); rejects, rolled back, with what `run` threw, or with the database's error. A receiver
   * with such a store never calls `complete` for an event that ran through it. With per-object
   * order (the store has `order`), `order` names the event's object and the rank it raises: the
   * same transaction raises the rank and frees the lock, as {@link ObjectOrderStore.complete}.
   */
  runInTransaction?(
    key: string,
    owner: string,
    run: (transaction: unknown) => unknown,
    order?: OrderedCompletion,
  ): Promise<boolean>;
}

/** What a claim records. */
export interface ClaimRequest {
  /** Token of the claiming receiver instance; only the owner can complete, fail or renew. */
  owner: string;
  leaseMs: number;
  /** The verified payload as JSON text, so another instance can process it if this one dies. */
  payload: string;
  /** The business id whose key verified the payload. */
  businessId: string;
}

/** The outcome of a claim. */
export type ClaimResult =
  | { status: 'claimed'; attempts: number; previous: 'new' | 'failed' | 'expired' }
  | { status: 'duplicate'; state: 'done' }
  /**
   * Held under a live lease by `owner`. An owner that finds its own token here while it holds
   * nothing under the key made a claim that ran late (it timed out, then reached the store): it may
   * take the event back with `renew`, which only its own live lease passes.
   */
  | { status: 'duplicate'; state: 'processing'; owner: string };

/** A record as stored. */
export interface StoredEvent {
  key: string;
  state: 'processing' | 'done' | 'failed';
  owner: string | undefined;
  /** Epoch ms when the lease lapses (processing only). */
  leaseUntil: number | undefined;
  payload: string | undefined;
  businessId: string | undefined;
  /** How many times the event was claimed. */
  attempts: number;
  error: string | undefined;
  /** Epoch ms of the first claim. */
  receivedAt: number;
  updatedAt: number;
}

/** An event that `recover` claimed for a new owner. */
export interface RecoveredEvent {
  key: string;
  payload: string;
  businessId: string;
  attempts: number;
}

/**
 * Per-object order, the optional capability {@link IdempotencyStore.order}.
 *
 * An object is named by the receiver: `object` is unique within the business of the event key
 * (`key` is `<business id>:<checksum>`, the business the part before its last `:`), and a store
 * keeps the objects of different businesses apart. For each object the store keeps:
 * - its lock, held by one event at a time: by the claim of the event `key` that took it with
 *   `lock`, for as long as that claim lasts (the event `processing` under a live lease, its
 *   `attempts` unchanged). There is no lease of its own: renewing the event's lease keeps the lock,
 *   and completing or failing the event, or its lease lapsing (the owner died), frees it, so a dead
 *   holder never blocks its object past one lease. A new claim of the event (a recovery, a
 *   redelivery or replay after a failure: `attempts` grows) does not inherit the lock: it must
 *   `lock` again like any other event, or an event waiting behind it for its turn on the same
 *   instance could wait forever;
 * - its rank: the highest rank among the events of the object completed through
 *   {@link ObjectOrderStore.complete}, kept at least as long as the tombstones (the retention),
 *   counted from the object's last completion.
 */
export interface ObjectOrderStore {
  /**
   * Takes the lock of `object` for the event `key`, which `owner` must hold (`processing` under
   * its live lease; `lost` otherwise). `locked`, with the object's rank (undefined before any
   * ranked completion), if no other event holds the lock or `key` holds it already; `busy` if
   * another event holds it. Never waits: the receiver parks the event and asks again.
   */
  lock(key: string, owner: string, object: string): Promise<ObjectLock>;
  /**
   * Marks the held `key` done, as {@link IdempotencyStore.complete} does, and in the same atomic
   * step raises the object's rank to `rank` if it is higher (undefined leaves the rank as it is)
   * and frees the lock. False, changing nothing, if `owner` no longer holds `key`.
   */
  complete(key: string, owner: string, object: string, rank: number | undefined): Promise<boolean>;
}

/** An ordered event's object and the rank its completion raises (undefined: none, it was stale). */
export interface OrderedCompletion {
  object: string;
  rank: number | undefined;
}

/** The answer of {@link ObjectOrderStore.lock}. */
export type ObjectLock =
  | { status: 'locked'; rank: number | undefined }
  | { status: 'busy' }
  | { status: 'lost' };
