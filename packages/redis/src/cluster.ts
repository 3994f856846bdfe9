// What the store needs to know of a Redis Cluster: which client it was given, the slot of a key,
// and the connection of the master serving that slot (where a claim's WAIT must go, and where
// `CONFIG GET` reads each master's persistence). docs/decisions.md, "Redis Cluster".
import type { Cluster, Redis } from 'ioredis';

/** Whether the client is an ioredis `Cluster` (by its flag, not `instanceof`: two copies of ioredis may meet). */
export function isCluster(client: Redis | Cluster): client is Cluster {
  return (client as { isCluster?: unknown }).isCluster === true;
}

/** CRC16/XMODEM, the checksum Redis Cluster maps keys to slots with. */
function crc16(data: Uint8Array): number {
  let crc = 0;
  for (const byte of data) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

const utf8 = new TextEncoder();

/** The cluster slot of a key, as `CLUSTER KEYSLOT` computes it: the hash tag's (`{...}`), if any. */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(utf8.encode(key)) % 16384;
}

/** `host:port` of a node's connection, as the cluster client names its nodes. */
export function nodeName(node: Redis): string {
  return `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`;
}

const readiness = new WeakMap<Cluster, Promise<void>>();

/**
 * Resolves once the cluster client is ready (it knows the slots and their masters); rejects if it
 * ends first. One wait per client, whoever asks; callers bound it with their own timeout.
 */
export function clusterReady(cluster: Cluster): Promise<void> {
  if (cluster.status === 'ready') return Promise.resolve();
  if (cluster.status === 'end') return Promise.reject(new Error('the Redis Cluster client is closed'));
  let ready = readiness.get(cluster);
  if (!ready) {
    ready = new Promise<void>((resolve, reject) => {
      const onReady = () => {
        cluster.off('end', onEnd);
        resolve();
      };
      const onEnd = () => {
        cluster.off('ready', onReady);
        reject(new Error('the Redis Cluster client closed before it was ready'));
      };
      cluster.once('ready', onReady);
      cluster.once('end', onEnd);
    }).finally(() => readiness.delete(cluster));
    readiness.set(cluster, ready);
  }
  return ready;
}

/**
 * The connection the cluster client uses for the master of `key`'s slot, by its current slot
 * table; undefined when the table names no master for it (the client not ready, or a node unknown).
 */
export function masterOf(cluster: Cluster, key: string): Redis | undefined {
  const name = cluster.slots[keySlot(key)]?.[0];
  if (name === undefined) return undefined;
  return cluster.nodes('master').find((node) => nodeName(node) === name);
}

/** Whether a reply error is a cluster redirection: the slot is served elsewhere (`MOVED`) or moving (`ASK`). */
export function isRedirection(error: unknown): boolean {
  return error instanceof Error && /^(MOVED|ASK) /.test(error.message);
}
