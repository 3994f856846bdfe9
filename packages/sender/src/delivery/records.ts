import { sql } from 'kysely';
import { type Database, PREPARE } from '../db/database.js';
import type { Claim } from './claim.js';
import type { AttemptOutcome } from './http-client.js';
import { nextAttemptAt } from './schedule.js';
import type { WorkerLogger } from './worker.js';

/** How long an attempt's outcome waits for others to be recorded with it, in ms. */
const RECORD_WINDOW_MS = 2;

/** What {@link createAttemptRecorder} needs of its worker. */
export interface AttemptRecorderOptions {
  database: Database;
  /** The worker's clock. */
  now: () => Date;
  /** The random source of the retry jitter. */
  random: () => number;
  logger: WorkerLogger;
}

/**
 * The delivery worker's attempt log: each outcome becomes an attempt row and the delivery's next
 * state (delivered, failed for good, or its next attempt on the schedule of DESIGN.md), written in
 * one statement for many outcomes at once (docs/decisions.md, "Attempt records are
 * group-committed"). The returned function resolves once its outcome is written.
 */
export function createAttemptRecorder(
  options: AttemptRecorderOptions,
): (claim: Claim, startedAt: Date, outcome: AttemptOutcome) => Promise<void> {
  const { database, now, random, logger: log } = options;

  /** An attempt's outcome waiting to be written, and who waits for it. */
  interface Pending {
    claim: Claim;
    startedAt: Date;
    outcome: AttemptOutcome;
    done: (error?: unknown) => void;
  }
  const unwritten: Pending[] = [];
  let writing = false;

  /**
   * Records an attempt and the delivery's next state, if the worker still holds the claim.
   * Outcomes that finish while a write is running go together in the next one (group commit):
   * one statement and one commit for many deliveries. With no write running, the first outcome
   * waits {@link RECORD_WINDOW_MS} for others: with few attempts in flight (a URL at its limit),
   * writing each at once made a statement and a commit for every one or two.
   */
  function record(claim: Claim, startedAt: Date, outcome: AttemptOutcome): Promise<void> {
    return new Promise((resolve, reject) => {
      unwritten.push({ claim, startedAt, outcome, done: (error) => (error ? reject(error) : resolve()) });
      if (!writing) {
        writing = true;
        setTimeout(() => void writeAll(), RECORD_WINDOW_MS);
      }
    });
  }

  async function writeAll(): Promise<void> {
    while (unwritten.length > 0) {
      const batch = unwritten.splice(0, 500);
      try {
        await writeBatch(batch);
        for (const p of batch) p.done();
      } catch (error) {
        for (const p of batch) p.done(error);
      }
    }
    writing = false;
  }

  async function writeBatch(batch: Pending[]): Promise<void> {
    const rows = batch.map(({ claim, startedAt, outcome }) => {
      const attempts = claim.attempts + 1;
      const first = claim.first_attempt_at ?? startedAt;
      const next = outcome.ok
        ? null
        : nextAttemptAt({ attempts, firstAttemptAt: first, lastAttemptAt: startedAt }, random);
      const status = outcome.ok ? 'delivered' : next === null ? 'failed' : 'pending';
      return { claim, attempts, first, next, status, startedAt, outcome };
    });
    // PostgreSQL text cannot hold NUL: a receiver's binary answer is stored without it.
    const text = (value: string | null | undefined) =>
      value === null || value === undefined ? null : value.replaceAll('\0', '');
    const finishedAt = now().toISOString();
    // One JSON parameter (one native JSON.stringify) rather than an array parameter per column,
    // each escaped element by element by the driver.
    const values = JSON.stringify(
      rows.map((r) => ({
        id: r.claim.id,
        token: r.claim.token,
        status: r.status,
        attempts: r.attempts,
        first_attempt_at: r.first,
        started_at: r.startedAt,
        next_attempt_at: r.next,
        status_code: r.outcome.statusCode,
        error_message: text(r.outcome.error?.message),
        error_code: text(r.outcome.error?.code),
        url: r.claim.url,
        latency_ms: Math.round(r.outcome.latencyMs),
        response_body: text(r.outcome.responseBody),
      })),
    );
    const statement = sql<{ id: string }>`${sql.raw(PREPARE)}
      with v as (
        select * from json_to_recordset(${values}::json) as v(
          id uuid, token uuid, status text, attempts integer, first_attempt_at timestamptz,
          started_at timestamptz, next_attempt_at timestamptz, status_code integer, error_message text,
          error_code text, url text, latency_ms integer, response_body text)
      ),
      kept as (
        update deliveries d
        set status = v.status, attempts = v.attempts, first_attempt_at = v.first_attempt_at,
            last_attempt_at = v.started_at, last_status_code = v.status_code, last_error = v.error_message,
            claim_token = null, next_attempt_at = coalesce(v.next_attempt_at, d.next_attempt_at),
            finished_at = case when v.next_attempt_at is null then ${finishedAt}::timestamptz end
        from v
        where d.id = v.id and d.claim_token = v.token
        returning v.id, v.attempts, v.url, v.started_at, v.latency_ms, v.status_code, v.response_body,
                  v.error_code, v.error_message
      )
      insert into delivery_attempts
        (delivery_id, attempt, url, started_at, latency_ms, status_code, response_body, error_code, error_message)
      select * from kept
      returning delivery_id as id`;
    const result = await database.delivery((db) => statement.execute(db));
    const kept = new Set(result.rows.map((r) => r.id));
    for (const r of rows) {
      if (!kept.has(r.claim.id)) {
        log.warn(
          { delivery: r.claim.id, url: r.claim.url },
          'delivery lease lost before its attempt was recorded',
        );
      } else if (r.status === 'failed') {
        log.warn(
          { delivery: r.claim.id, url: r.claim.url, attempts: r.attempts },
          'delivery failed for good: 48 hours passed',
        );
      }
    }
  }

  return record;
}
