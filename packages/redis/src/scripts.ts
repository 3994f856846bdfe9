// The store's Lua scripts. Each runs atomically in one round trip and touches only keys that share
// one hash tag (the event's business), so they are cluster-safe: an event's record `E` and its
// tag's lease index `L` (a sorted set of event ids by lease expiry). Times come from the Redis
// server's clock, so instances whose clocks disagree still agree on leases.
import type { Cluster, Redis } from 'ioredis';

const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/**
 * KEYS: E, L. ARGV: owner, leaseMs, payload, businessId, retentionMs, member, touch.
 * A record under a live lease is a duplicate whoever asks, its own owner included (the reply names
 * the owner): two requests of one instance are two claims. With touch = 1 a duplicate stamps the
 * record (`seen`), a write that a following WAIT on this connection must see replicated.
 */
export const CLAIM = `${NOW}
local r = redis.call('HMGET', KEYS[1], 'state', 'lease', 'attempts', 'received', 'owner')
local state = r[1]
local previous = 'new'
if state then
  local live = state == 'processing' and tonumber(r[2]) > now
  if (state == 'done' or live) and ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'seen', now) end
  if state == 'done' then return {'duplicate', 'done'} end
  if live then return {'duplicate', 'processing', r[5] or ''} end
  if state == 'failed' then previous = 'failed' else previous = 'expired' end
end
local attempts = (tonumber(r[3]) or 0) + 1
local lease = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'state', 'processing', 'owner', ARGV[1], 'lease', lease, 'payload', ARGV[3],
  'biz', ARGV[4], 'attempts', attempts, 'received', r[4] or now, 'updated', now)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], lease, ARGV[6])
return {'claimed', previous, attempts}`;

const HELD = `local r = redis.call('HMGET', KEYS[1], 'state', 'owner')
if r[1] ~= 'processing' or r[2] ~= ARGV[1] then return 0 end`;

/** KEYS: E, L. ARGV: owner, leaseMs, member. */
export const RENEW = `${HELD}
${NOW}
local lease = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'lease', lease)
redis.call('ZADD', KEYS[2], lease, ARGV[3])
return 1`;

/** KEYS: E, L. ARGV: owner, retentionMs, member. Keeps a tombstone (no payload) for the retention. */
export const COMPLETE = `${HELD}
${NOW}
redis.call('HSET', KEYS[1], 'state', 'done', 'updated', now)
redis.call('HDEL', KEYS[1], 'owner', 'lease', 'payload')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
return 1`;

/** KEYS: E, L. ARGV: owner, retentionMs, member, error. Keeps payload and error for replay. */
export const FAIL = `${HELD}
${NOW}
redis.call('HSET', KEYS[1], 'state', 'failed', 'error', ARGV[4], 'updated', now)
redis.call('HDEL', KEYS[1], 'owner', 'lease')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
return 1`;

/**
 * KEYS: L. ARGV: owner, leaseMs, limit, record key prefix (the record of member m is prefix .. m).
 * Claims for `owner` the events whose lease lapsed; the records share L's hash tag.
 */
export const RECOVER = `${NOW}
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
local lease = now + tonumber(ARGV[2])
for _, member in ipairs(due) do
  local key = ARGV[4] .. member
  local r = redis.call('HMGET', key, 'state', 'lease', 'attempts', 'payload', 'biz')
  if r[1] == 'processing' and tonumber(r[2]) <= now and r[4] then
    local attempts = (tonumber(r[3]) or 0) + 1
    redis.call('HSET', key, 'owner', ARGV[1], 'lease', lease, 'attempts', attempts, 'updated', now)
    redis.call('ZADD', KEYS[1], lease, member)
    table.insert(out, member)
    table.insert(out, r[4])
    table.insert(out, r[5] or '')
    table.insert(out, attempts)
  elseif r[1] ~= 'processing' then
    redis.call('ZREM', KEYS[1], member)
  end
end
return out`;

export type ClaimReply = [string, string, (number | string)?];

export type ScriptCommands = {
  payhookClaim(e: string, l: string, ...args: (string | number)[]): Promise<ClaimReply>;
  payhookRenew(e: string, l: string, ...args: (string | number)[]): Promise<number>;
  payhookComplete(e: string, l: string, ...args: (string | number)[]): Promise<number>;
  payhookFail(e: string, l: string, ...args: (string | number)[]): Promise<number>;
  payhookRecover(l: string, ...args: (string | number)[]): Promise<(string | number)[]>;
};

export const SCRIPTS: Record<keyof ScriptCommands, [number, string]> = {
  payhookClaim: [2, CLAIM],
  payhookRenew: [2, RENEW],
  payhookComplete: [2, COMPLETE],
  payhookFail: [2, FAIL],
  payhookRecover: [1, RECOVER],
};

/** Defines the store's scripts on a client (ioredis sends each by its SHA, loading it where missing). */
export function defineScripts(client: Redis | Cluster, names: (keyof ScriptCommands)[]): ScriptCommands {
  for (const name of names) {
    if (typeof (client as unknown as Record<string, unknown>)[name] === 'function') continue;
    const [numberOfKeys, lua] = SCRIPTS[name];
    client.defineCommand(name, { numberOfKeys, lua });
  }
  return client as unknown as ScriptCommands;
}
