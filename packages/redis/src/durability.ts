// What the store needs from Redis to keep an acknowledged event: the server's persistence settings,
// read and warned about at start, and, with `durability: 'replicas'`, a WAIT that confirms each
// claim on the replicas before the receiver answers 200. docs/decisions.md, "Durable means durable".
import type { Logger } from '@payhook/core';
import type { Cluster, Redis } from 'ioredis';
import { clusterReady, nodeName } from './cluster.js';

/** What the store read of the Redis server's persistence settings. */
export interface RedisPersistence {
  /** `appendonly` as the server reports it (`yes` or `no`); undefined when it could not be read. */
  appendonly: string | undefined;
  /** `appendfsync` (`always`, `everysec` or `no`); undefined when it could not be read. */
  appendfsync: string | undefined;
  /**
   * Whether an acknowledged event survives a restart of the Redis process (`appendonly yes`):
   * undefined when the settings could not be read.
   */
  survivesRestart: boolean | undefined;
  /** Why the settings could not be read (`CONFIG` renamed or forbidden, the server unreachable). */
  error?: string;
  /**
   * On a Redis Cluster: each master's settings by `host:port`, as read at start. The fields above
   * are then the weakest master's: an event survives a restart only if its slot's master keeps it.
   */
  masters?: Record<string, RedisPersistence>;
}

/**
 * Reads `appendonly` and `appendfsync` with `CONFIG GET`. Never throws: a managed Redis that
 * renames or forbids `CONFIG` gives a report with `survivesRestart` undefined and the reason.
 */
export async function readPersistence(redis: Redis, timeoutMs: number): Promise<RedisPersistence> {
  try {
    const reply = await within(redis.call('CONFIG', 'GET', 'append*') as Promise<unknown>, timeoutMs);
    const settings = new Map<string, string>();
    if (Array.isArray(reply)) {
      for (let i = 0; i + 1 < reply.length; i += 2) settings.set(String(reply[i]), String(reply[i + 1]));
    }
    const appendonly = settings.get('appendonly');
    return {
      appendonly,
      appendfsync: settings.get('appendfsync'),
      survivesRestart: appendonly === undefined ? undefined : appendonly === 'yes',
    };
  } catch (error) {
    return {
      appendonly: undefined,
      appendfsync: undefined,
      survivesRestart: undefined,
      error: (error as Error).message,
    };
  }
}

/** How weak a node's settings are: lower loses more (in memory only, unknown, then by appendfsync). */
function strength(report: RedisPersistence): number {
  if (report.survivesRestart !== true) return report.survivesRestart === false ? 0 : 1;
  return 2 + ['no', 'everysec', 'always'].indexOf(report.appendfsync ?? 'no');
}

/**
 * Reads the persistence settings of every master of a Redis Cluster (once the client knows them),
 * each with `CONFIG GET` on that master's connection. Never throws.
 */
export async function readClusterPersistence(cluster: Cluster, timeoutMs: number): Promise<RedisPersistence> {
  const unread = (error: string): RedisPersistence => ({
    appendonly: undefined,
    appendfsync: undefined,
    survivesRestart: undefined,
    error,
  });
  try {
    await within(clusterReady(cluster), timeoutMs);
  } catch (error) {
    return unread(`the cluster's masters are unknown: ${(error as Error).message}`);
  }
  const masters = await Promise.all(
    cluster
      .nodes('master')
      .map(async (node) => [nodeName(node), await readPersistence(node, timeoutMs)] as const),
  );
  const weakest = [...masters].sort(([, a], [, b]) => strength(a) - strength(b))[0];
  if (!weakest) return unread('the cluster client knows no master');
  return { ...weakest[1], masters: Object.fromEntries(masters) };
}

/** Where the persistence report is about: the server, or the cluster masters that the weakest settings are on. */
export function persistenceSubject(persistence: RedisPersistence, where: string): string {
  if (!persistence.masters) return where;
  const masters = Object.entries(persistence.masters)
    .filter(([, report]) => report.survivesRestart === persistence.survivesRestart)
    .map(([name]) => name);
  return `${masters.join(', ')} (Redis Cluster master${masters.length === 1 ? '' : 's'})`;
}

/** `promise`, or a rejection after `timeoutMs`. */
async function within<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Logs what the persistence settings mean for acknowledged events: one warning when they would not
 * survive a Redis restart; a note (info) when the settings could not be read.
 */
export function reportPersistence(persistence: RedisPersistence, where: string, logger: Logger): void {
  if (persistence.survivesRestart === false) {
    logger.warn(
      { redis: where, appendonly: persistence.appendonly },
      `payhook: Redis at ${where} keeps acknowledged events in memory only (appendonly ${persistence.appendonly}): a restart of Redis loses every event acknowledged but not yet processed, and every idempotency record. Set "appendonly yes" (with "appendfsync always" nothing acknowledged is lost; "everysec" loses up to about a second on a crash of the Redis host), or pass checkPersistence: false to createRedisStore if this is deliberate.`,
    );
  } else if (persistence.survivesRestart === undefined) {
    logger.info(
      { redis: where, reason: persistence.error },
      `payhook: could not read the persistence settings of Redis at ${where} (${persistence.error}); acknowledged events survive a Redis restart only with "appendonly yes".`,
    );
  }
}

/** The error of a claim whose write the replicas did not confirm in time: the receiver answers 503. */
export class ReplicationTimeoutError extends Error {
  override readonly name = 'ReplicationTimeoutError';
  constructor(
    readonly confirmed: number,
    readonly required: number,
    waitMs: number,
  ) {
    super(
      `Redis replicas confirmed the claim on ${confirmed} of ${required} within ${waitMs} ms; the event was not acknowledged.`,
    );
  }
}

/**
 * Confirms this connection's writes on `replicas` replicas with `WAIT replicas waitMs`. Calls that
 * come while a WAIT is out share the next one: a WAIT covers every write the connection sent
 * before it, and the next one is sent only after the caller's own write was answered, so it covers
 * that write. Many concurrent claims then cost one WAIT per round trip to the replicas, not one
 * each (each WAIT holds the connection while it waits).
 */
export function createReplicaWaiter(
  send: () => Promise<number>,
  replicas: number,
  waitMs: number,
): () => Promise<void> {
  let inFlight: Promise<number> | undefined;
  let next: Promise<number> | undefined;
  const issue = (): Promise<number> => {
    const sent = send().finally(() => {
      if (inFlight === sent) inFlight = undefined;
    });
    inFlight = sent;
    return sent;
  };
  const check = (confirmed: number) => {
    if (confirmed < replicas) throw new ReplicationTimeoutError(confirmed, replicas, waitMs);
  };
  return () => {
    if (!inFlight) return issue().then(check);
    if (!next) {
      next = inFlight
        .catch(() => 0)
        .then(() => {
          next = undefined;
          return issue();
        });
    }
    return next.then(check);
  };
}
