import { spawn } from 'node:child_process';
import { Cluster, type ClusterOptions, Redis } from 'ioredis';
import { freePort } from './free-port.js';
import { type RedisProcess, startRedisServer } from './redis-server.js';

/** A Redis Cluster of a test's own: `redis-server` processes on loopback ports, each in its own directory. */
export interface RedisClusterProcess {
  /** The masters, as created (a failover may promote one of the replicas since). */
  readonly masters: readonly RedisProcess[];
  /** The replicas, `replicas` per master, in the order `redis-cli --cluster create` assigned them. */
  readonly replicas: readonly RedisProcess[];
  /** Every node's `{ host, port }`: the startup nodes of a `Cluster` client. */
  readonly nodes: { host: string; port: number }[];
  /** The same as `host:port,host:port,...`, for a process's environment (`REDIS_CLUSTER_NODES`). */
  readonly nodeList: string;
  /** A `Cluster` client of these nodes (closed by `stop()` if still open); errors are swallowed, commands fail. */
  client(options?: ClusterOptions): Cluster;
  /** Kills every node and removes their directories. */
  stop(): Promise<void>;
}

/** Options of {@link startRedisCluster}. */
export interface RedisClusterOptions {
  /** Replicas per master (default 0): with 1, six processes. */
  replicas?: number;
  /** `cluster-node-timeout` in ms (default 2000): how long a master may be unreachable before its replica takes over. */
  nodeTimeoutMs?: number;
}

/**
 * Starts a Redis Cluster of three masters (and `replicas` replicas each) on free loopback ports:
 * each node a `redis-server --cluster-enabled yes` of its own (no AOF, no snapshots), then
 * `redis-cli --cluster create`, then waits until every node reports `cluster_state:ok` (and every
 * replica's link to its master is up). Fails with the command's name and output when
 * `redis-server` or `redis-cli` is missing or fails: never a silent skip.
 *
 * @example
 * ```ts
 * const cluster = await startRedisCluster();
 * const client = cluster.client(); // new Cluster(cluster.nodes)
 * await cluster.stop();
 * ```
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisClusterProcess> {
  const replicasPerMaster = options.replicas ?? 0;
  const count = 3 * (1 + replicasPerMaster);
  const servers: RedisProcess[] = [];
  const clients = new Set<Cluster>();
  const stop = async () => {
    for (const client of clients) client.disconnect();
    await Promise.all(servers.map((server) => server.destroy()));
  };
  try {
    for (let i = 0; i < count; i++) {
      servers.push(
        await startRedisServer({
          args: async () => [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            'nodes.conf',
            // The bus port is the client port + 10000 by default: out of range for a high free port.
            '--cluster-port',
            String(await freePort()),
            '--cluster-node-timeout',
            String(options.nodeTimeoutMs ?? 2000),
            // A replica's first sync starts at once (Redis waits 5 s for more replicas by default).
            '--repl-diskless-sync-delay',
            '0',
          ],
        }),
      );
    }
    const addresses = servers.map((server) => `127.0.0.1:${server.port}`);
    await run('redis-cli', [
      '--cluster',
      'create',
      ...addresses,
      '--cluster-replicas',
      String(replicasPerMaster),
      '--cluster-yes',
    ]);
    await waitForClusterOk(servers);
    const roles = await Promise.all(servers.map((server) => role(server.port)));
    const masters = servers.filter((_, i) => roles[i] === 'master');
    const replicas = servers.filter((_, i) => roles[i] !== 'master');
    const nodes = servers.map((server) => ({ host: '127.0.0.1', port: server.port }));
    return {
      masters,
      replicas,
      nodes,
      nodeList: addresses.join(','),
      client(clientOptions = {}) {
        const client = new Cluster(nodes, clientOptions);
        client.on('error', () => {});
        client.on('end', () => clients.delete(client));
        clients.add(client);
        return client;
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Runs a command to its end; fails naming it (and with its output) when it is missing or fails. */
function run(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk;
    });
    child.on('error', (error) =>
      reject(
        new Error(
          `Cannot run ${command} (${error.message}): the Redis Cluster tests need it installed (the redis-tools package on Debian).`,
        ),
      ),
    );
    child.on('close', (code) => {
      if (code === 0) resolve();
      else reject(new Error(`${command} ${args.join(' ')} exited with ${code}:\n${output}`));
    });
  });
}

async function info(port: number, command: string[]): Promise<string> {
  const redis = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    return String(await redis.call(command[0] as string, ...command.slice(1)));
  } finally {
    redis.disconnect();
  }
}

async function role(port: number): Promise<string> {
  return /^role:(\w+)/m.exec(await info(port, ['INFO', 'replication']))?.[1] ?? 'unknown';
}

/** Waits until every node says `cluster_state:ok` and every replica's link to its master is up. */
async function waitForClusterOk(servers: RedisProcess[]): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const states = await Promise.all(
      servers.map(async (server) => {
        const cluster = await info(server.port, ['CLUSTER', 'INFO']).catch(() => '');
        const replication = await info(server.port, ['INFO', 'replication']).catch(() => '');
        const ok = cluster.includes('cluster_state:ok');
        const linked = !replication.includes('role:slave') || replication.includes('master_link_status:up');
        return ok && linked;
      }),
    );
    if (states.every(Boolean)) return;
    if (Date.now() > deadline) {
      const ports = servers.filter((_, i) => !states[i]).map((server) => server.port);
      throw new Error(`The Redis Cluster was not ready within 20 s (nodes on ports ${ports.join(', ')}).`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
