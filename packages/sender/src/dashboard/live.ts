import type { ServerResponse } from 'node:http';
import type { Principal } from '../auth/api-keys.js';
import type { AttemptFeed, FedAttempt } from '../delivery/feed.js';

/** At most this many dashboards stream at once per business and mode, on one instance. */
export const MAX_LIVE_PER_BUSINESS = 100;

/** Attempts sent per message at most: the newest; the page refreshes to show the rest. */
const MAX_PER_MESSAGE = 20;

/** A stream that has this much unsent is skipped until it drains (a slow or stalled browser). */
const MAX_BUFFERED_BYTES = 64 * 1024;

const KEEPALIVE_MS = 15_000;

/**
 * Attempts are gathered for this long and sent as one message per stream: a worker recording
 * hundreds of batches a second costs each stream a few writes a second, not hundreds.
 */
const FLUSH_MS = 500;

/**
 * How long the feed is still read after the last stream closes: moving from page to page closes
 * one stream and opens the next, and the attempts in between are kept for it.
 */
const LINGER_MS = 5 * 60_000;

/** The attempts of one business and mode in a batch, as one server-sent event. */
function message(attempts: FedAttempt[], count = attempts.length): string {
  const newest = attempts.slice(-MAX_PER_MESSAGE).map((a) => ({
    event_id: a.eventId,
    event_type: a.eventType,
    url: a.url,
    attempt: a.attempt,
    status: a.status,
    status_code: a.statusCode,
    latency_ms: a.latencyMs,
    error_code: a.errorCode,
    at: a.startedAt.toISOString(),
  }));
  return `event: attempts\ndata: ${JSON.stringify({ count, attempts: newest })}\n\n`;
}

/**
 * The dashboards' live streams on this instance: each batch the worker records is grouped by
 * business and mode, serialized once per group, and written to that group's open streams only
 * (a business never sees another's attempts). A new stream starts with the business's latest
 * attempts (up to 20), so that a page loaded just after an attempt still shows it. Attempts made
 * by another sender instance on the same database reach the pages through their refresh, not
 * through this stream.
 */
export function createLiveStreams(feed: AttemptFeed | undefined) {
  const streams = new Map<string, Set<ServerResponse>>();
  /** The latest attempts of each business and mode that has had a stream, while the feed is read. */
  const recent = new Map<string, FedAttempt[]>();
  let unsubscribe: (() => void) | undefined;
  let linger: NodeJS.Timeout | undefined;
  const stopReading = () => {
    unsubscribe?.();
    unsubscribe = undefined;
    recent.clear();
  };
  const keyOf = (p: { businessId: string; mode: string }) => `${p.mode}:${p.businessId}`;

  /** Attempts gathered since the last flush, by business and mode. */
  const groups = new Map<string, { count: number; attempts: FedAttempt[] }>();
  let flushing: NodeJS.Timeout | undefined;
  const flush = () => {
    flushing = undefined;
    for (const [key, group] of groups) {
      if (!streams.has(key)) continue;
      const text = message(group.attempts, group.count);
      for (const raw of streams.get(key) ?? []) {
        if (raw.writableLength < MAX_BUFFERED_BYTES) raw.write(text);
      }
    }
    groups.clear();
  };

  const onAttempts = (attempts: readonly FedAttempt[]) => {
    for (const a of attempts) {
      const key = keyOf(a);
      const latest = recent.get(key);
      if (!latest) continue;
      latest.push(a);
      if (latest.length > MAX_PER_MESSAGE) latest.splice(0, latest.length - MAX_PER_MESSAGE);
      if (!streams.has(key)) continue;
      const group = groups.get(key);
      if (!group) groups.set(key, { count: 1, attempts: [a] });
      else {
        group.count++;
        group.attempts.push(a);
        // Only the newest are sent; the count says how many there were.
        if (group.attempts.length > 4 * MAX_PER_MESSAGE)
          group.attempts.splice(0, group.attempts.length - MAX_PER_MESSAGE);
      }
    }
    if (groups.size > 0 && !flushing) flushing = setTimeout(flush, FLUSH_MS);
  };

  return {
    /** How many streams `principal` has open here. */
    count(principal: Principal): number {
      return streams.get(keyOf(principal))?.size ?? 0;
    },
    /** Streams the attempts of `principal` to `raw` (headers already written) until it closes. */
    open(principal: Principal, raw: ServerResponse): void {
      const key = keyOf(principal);
      const set = streams.get(key) ?? new Set<ServerResponse>();
      streams.set(key, set);
      set.add(raw);
      clearTimeout(linger);
      if (feed && !unsubscribe) unsubscribe = feed.subscribe(onAttempts);
      const latest = recent.get(key) ?? [];
      recent.set(key, latest);
      raw.write(`retry: 3000\nevent: ready\ndata: {}\n\n`);
      if (latest.length > 0) raw.write(message(latest));
      const keepalive = setInterval(() => raw.write(': keepalive\n\n'), KEEPALIVE_MS);
      raw.on('close', () => {
        clearInterval(keepalive);
        set.delete(raw);
        if (set.size === 0) streams.delete(key);
        if (streams.size === 0) {
          clearTimeout(linger);
          linger = setTimeout(stopReading, LINGER_MS);
          linger.unref();
        }
      });
    },
    /** Ends every stream (a shutdown), so the server can close. */
    closeAll(): void {
      clearTimeout(linger);
      clearTimeout(flushing);
      stopReading();
      for (const set of streams.values()) for (const raw of set) raw.end();
    },
  };
}
