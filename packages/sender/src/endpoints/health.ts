// An endpoint's health: its run of failures as the API shows it, and the sweeper's look at the
// failing endpoints, which warns and has the lifecycle (`./lifecycle.ts`) disable them. The runs
// are kept by the attempts' record (`delivery/sql/endpoint-failures.ts`).
import { sql } from 'kysely';
import type { Database } from '../db/database.js';
import type { WorkerLogger } from '../delivery/logger.js';
import { type FailureRow, failuresOf } from '../delivery/sql/endpoint-failures.js';
import { isoMicros } from '../timestamps.js';
import { disableFailingEndpoint } from './lifecycle.js';

/** The shares of the failing period at which an endpoint is warned about, in percent. */
export const WARNING_LEVELS = [50, 75, 90] as const;

/** A warning level, or null before the first. */
export type WarningLevel = (typeof WARNING_LEVELS)[number] | null;

/** The rule that disables a failing endpoint (`config.endpointDisable`, in milliseconds). */
export interface DisableRule {
  /** How long every attempt must have failed; 0 never disables. */
  afterMs: number;
  /** The failed attempts that period needs. */
  minAttempts: number;
}

/**
 * An endpoint's run of failures as the API shows it (the `failure` field of a webhook endpoint):
 * since when every attempt failed, how many, the warning reached, and when it will be disabled if
 * nothing succeeds by then.
 */
export interface FailureView {
  failing_since: string;
  last_failure_at: string;
  failed_attempts: number;
  /** The share of the period passed, 0 to 100 (whole percent, rounded down). */
  period_percent: number;
  /** 50, 75 or 90 once that share of the period has passed; null before. */
  warning: WarningLevel;
  /**
   * When it is disabled if no attempt succeeds before: the end of the period, or later while the
   * run has fewer attempts than the rule needs; null when the rule never disables.
   */
  disables_at: string | null;
}

/** The warning level `percent` of the period has reached. */
export function warningLevel(percent: number): WarningLevel {
  let level: WarningLevel = null;
  for (const l of WARNING_LEVELS) if (percent >= l) level = l;
  return level;
}

/** The share of the period a run of failures has lasted at `now`, in whole percent (0 to 100). */
function percentOf(row: Pick<FailureRow, 'failing_since'>, rule: DisableRule, now: Date): number {
  if (rule.afterMs <= 0) return 0;
  const elapsed = now.getTime() - new Date(row.failing_since).getTime();
  return Math.max(0, Math.min(100, Math.floor((elapsed / rule.afterMs) * 100)));
}

/** A run of failures as the API shows it (see {@link FailureView}). */
export function failureView(row: FailureRow, rule: DisableRule, now: Date): FailureView {
  const percent = percentOf(row, rule, now);
  const end = new Date(new Date(row.failing_since).getTime() + rule.afterMs);
  return {
    failing_since: isoMicros(row.failing_since),
    last_failure_at: isoMicros(row.last_failure_at),
    failed_attempts: row.attempts,
    period_percent: percent,
    warning: rule.afterMs > 0 ? warningLevel(percent) : null,
    disables_at: rule.afterMs > 0 ? isoMicros(end < now ? now : end) : null,
  };
}

/**
 * The `failure` field of each of `endpointIds`: its run of failures, or null when its latest
 * attempt succeeded (or none was made).
 *
 * @example
 * ```ts
 * const failures = await endpointFailures(database, ids, rule, new Date());
 * const failure = failures.get(endpoint.id) ?? null;
 * ```
 */
export async function endpointFailures(
  database: Database,
  endpointIds: readonly string[],
  rule: DisableRule,
  now: Date,
): Promise<Map<string, FailureView>> {
  const rows = await failuresOf(database.db, endpointIds);
  return new Map(rows.map((r) => [r.endpoint_id, failureView(r, rule, now)]));
}

/** What {@link checkFailingEndpoints} did. */
export interface FailingCheck {
  /** Endpoints that reached a new warning level (each logged once, by one instance). */
  warned: { endpointId: string; url: string; warning: Exclude<WarningLevel, null> }[];
  /** Endpoints it disabled (`disabled_reason: "failing"`). */
  disabled: { endpointId: string; url: string }[];
}

interface FailingRow extends FailureRow {
  url: string;
  business_id: string;
  mode: string;
}

/**
 * The sweeper's look at the enabled endpoints that are failing: one that has failed every attempt
 * for the rule's period, with at least its number of attempts, is disabled with
 * `disabled_reason: "failing"`; its pending deliveries are kept, and claims leave them alone
 * until it is enabled again. One that passed 50, 75 or 90 % of the period is warned about in the
 * log, once per level (a conditional update decides which instance says it). Runs of endpoints
 * that no longer exist are forgotten. Safe on several instances at once.
 *
 * @example
 * ```ts
 * await checkFailingEndpoints(database, { afterMs: 5 * 86_400_000, minAttempts: 10 }, new Date(), app.log);
 * ```
 */
export async function checkFailingEndpoints(
  database: Database,
  rule: DisableRule,
  now: Date,
  log: WorkerLogger,
): Promise<FailingCheck> {
  const { db } = database;
  const done: FailingCheck = { warned: [], disabled: [] };
  await sql`delete from endpoint_failures f
    where not exists (select 1 from webhook_endpoints w where w.id = f.endpoint_id)`.execute(db);
  if (rule.afterMs <= 0) return done;
  const { rows } = await sql<FailingRow>`select f.endpoint_id, f.failing_since, f.last_failure_at,
      f.attempts, f.warned, w.url, w.business_id, w.mode
    from endpoint_failures f join webhook_endpoints w on w.id = f.endpoint_id
    where w.status = 'enabled'`.execute(db);
  for (const row of rows) {
    const percent = percentOf(row, rule, now);
    const context = { endpoint: row.endpoint_id, url: row.url, business: row.business_id, mode: row.mode };
    if (percent >= 100 && row.attempts >= rule.minAttempts) {
      const failingBefore = new Date(now.getTime() - rule.afterMs);
      if (await disableFailingEndpoint(db, row.endpoint_id, now, failingBefore)) {
        done.disabled.push({ endpointId: row.endpoint_id, url: row.url });
        log.warn(
          { ...context, failingSince: isoMicros(row.failing_since), failedAttempts: row.attempts },
          `webhook endpoint ${row.url} disabled: every attempt failed for ${describe(rule.afterMs)}; its pending deliveries are kept until it is enabled again`,
        );
      }
      continue;
    }
    const level = warningLevel(Math.min(percent, 99));
    if (level === null || level <= row.warned) continue;
    const raised = await sql<{ endpoint_id: string }>`update endpoint_failures set warned = ${level}
      where endpoint_id = ${row.endpoint_id}::uuid and warned < ${level} returning endpoint_id`.execute(db);
    if (raised.rows.length === 0) continue;
    done.warned.push({ endpointId: row.endpoint_id, url: row.url, warning: level });
    const at = new Date(new Date(row.failing_since).getTime() + rule.afterMs);
    log.warn(
      {
        ...context,
        warning: level,
        failingSince: isoMicros(row.failing_since),
        failedAttempts: row.attempts,
      },
      `webhook endpoint ${row.url} is failing: every attempt for ${level} % of ${describe(rule.afterMs)} failed; it is disabled at ${isoMicros(at)} unless one succeeds`,
    );
  }
  return done;
}

/** A period in words: `5 days`, `36 hours`, `90 seconds`. */
function describe(ms: number): string {
  const units: [number, string][] = [
    [86_400_000, 'day'],
    [3_600_000, 'hour'],
    [60_000, 'minute'],
    [1000, 'second'],
  ];
  for (const [size, name] of units) {
    if (ms % size === 0 && ms >= size) return `${ms / size} ${name}${ms === size ? '' : 's'}`;
  }
  return `${ms} ms`;
}
