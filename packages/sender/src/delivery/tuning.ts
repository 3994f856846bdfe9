// The delivery worker's tuning constants, in one place. Each is a measured choice: its reason and
// figure are in docs/decisions.md (the section named beside it), and the words (claim, hold, room,
// slot, pace, turn) are those of the glossary in docs/architecture.md. The limits a deployment
// sets (the worker's concurrency, each URL's concurrency bounds, the lease) are configuration
// (`config.ts`), not here.

// --- Holding claims ahead (held-claims.ts; decisions: "Attempt records are group-committed; the worker claims ahead") ---

/** Rows held per slot: the worker holds this many times its concurrency, a URL this many per slot. */
export const HELD_PER_SLOT = 4;
/** The share of the worker's capacity that one fast URL may hold at most. */
export const URL_HELD_SHARE = 3 / 4;
/**
 * How far ahead a URL's held rows should last at its pace, in ms: about the time a claim takes on
 * a busy database, so that a fast URL's next rows arrive before its slots run dry.
 */
export const PACE_HORIZON_MS = 25;
/** URLs whose pace is kept (the least recently sent to are forgotten). */
export const PACES_KEPT = 1024;
/** The weight of each answer in a URL's pace (a moving average). */
export const PACE_WEIGHT = 1 / 8;

// --- A pass of claims (claimer.ts; decisions: "One URL's backlog, and per-URL concurrency") ---

/** Claims in a row, per pass, that may read nothing but backlogs to move to their turn. */
export const PACING_CLAIMS = 8;
/** The most rows one such claim reads. */
export const PACING_LIMIT = 1024;

/**
 * On PGlite, the window of new rows' wake-ups, in ms (`windowed` in db/wake.ts): the first wakes at
 * once, those within the window share one claim at its end. A claim costs PGlite's one thread
 * about a millisecond, as much as the session that woke it.
 */
export const PGLITE_WAKE_WINDOW_MS = 4;

// --- Recording attempts (attempt-recorder.ts; decisions: "Attempt records are group-committed; the worker claims ahead") ---

/** How long an attempt's outcome waits for others to be recorded with it, in ms. */
export const RECORD_WINDOW_MS = 6;
/** Outcomes that, waiting after a write, are written at once rather than after a window. */
export const RECORD_BATCH = 32;

// --- Each URL's concurrency (url-concurrency.ts; decisions: "Each URL's concurrency follows its answers") ---

/** How many URLs' limits are kept (the least recently answered are forgotten, back to `initial`). */
export const URLS_KEPT = 1024;
/** The weight of each answer in a URL's latency average. */
export const LATENCY_WEIGHT = 1 / 8;
/**
 * A URL whose latency average is above this many times its best (plus {@link QUEUE_SLACK_MS}) is
 * queueing our attempts: its limit stops growing until the average comes down.
 */
export const QUEUE_FACTOR = 2;
/** See {@link QUEUE_FACTOR}, in ms. */
export const QUEUE_SLACK_MS = 10;
/** How fast a URL's best latency forgets a fast past (per answer), so a moved server is relearnt. */
export const BEST_DRIFT = 1.001;
/**
 * How often the event loop's lateness is sampled (loop-stalls.ts), in ms: an attempt's latency less
 * the loop's lateness meanwhile is what its URL's concurrency learns from.
 */
export const LOOP_TICK_MS = 10;

// --- An endpoint's rate limit (endpoints/rate-limit.ts; decisions: "A rate limit per endpoint") ---

/** How far ahead an attempt may reserve its send time and wait for it in this process, in ms. */
export const RATE_HORIZON_MS = 1000;
/** How long this process keeps an endpoint's limit (or its having none) before reading it again, in ms. */
export const RATE_CACHE_MS = 5000;

// --- After a failure (orphan-sweeps.ts; decisions: "A database outage is an answer") ---

/** When the sweeps run after a failure or an outage's end, in ms. */
export const ORPHAN_SWEEPS_MS: readonly number[] = [250, 2000, 5000, 12_000];
