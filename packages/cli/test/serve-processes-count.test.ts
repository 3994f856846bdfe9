import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import {
  autoProcesses,
  databaseOnThisMachine,
  fitProcesses,
  processCount,
} from '../src/commands/serve-processes.js';

describe('serve --processes: how many', () => {
  const cores = Math.min(availableParallelism(), 8);

  it('tells a database on this machine from one elsewhere', () => {
    for (const url of [
      'postgres://postgres@127.0.0.1:5432/payhook',
      'postgres://localhost/payhook',
      'postgres://[::1]:5432/payhook',
      'postgres:///payhook?host=/var/run/postgresql',
      'postgres:///payhook',
    ])
      expect(databaseOnThisMachine(url), url).toBe(true);
    for (const url of ['postgres://db.internal:5432/payhook', 'postgres://10.0.0.5/payhook'])
      expect(databaseOnThisMachine(url), url).toBe(false);
  });

  it('runs one per core, or half the cores beside a database of this machine, and one on PGlite', () => {
    expect(autoProcesses('postgres://db.internal/payhook')).toBe(cores);
    expect(autoProcesses('postgres://127.0.0.1/payhook')).toBe(Math.max(1, Math.floor(cores / 2)));
    expect(processCount(undefined, 'postgres://db.internal/payhook')).toBe(cores);
    expect(processCount('auto', 'postgres://db.internal/payhook')).toBe(cores);
    expect(processCount('3', 'postgres://127.0.0.1/payhook')).toBe(3);
    expect(processCount(undefined, undefined)).toBe(1);
    expect(processCount('auto', undefined)).toBe(1);
    expect(() => processCount('2', undefined)).toThrow('needs PostgreSQL (--database-url)');
    for (const bad of ['0', 'two', '1.5', '999', ' 2'])
      expect(() => processCount(bad, 'postgres://127.0.0.1/p'), bad).toThrow('takes a number from 1 to 256');
  });

  it("fits auto to the server's free connections, and warns, never refuses, a number asked for", () => {
    const room = { max: 100, reserved: 3, inUse: 10 }; // 87 free
    // Room for all: nothing said.
    expect(fitProcesses(4, true, 16, room)).toEqual({ processes: 4 });
    expect(fitProcesses(5, false, 16, room)).toEqual({ processes: 5 });
    // auto on 8 cores and a database elsewhere: 8 x 16 = 128 > 87, so 5, and it says why.
    const auto = fitProcesses(8, true, 16, room);
    expect(auto.processes).toBe(5);
    expect(auto.note?.text).toMatch(
      /^Running 5 sender processes, not 8: the server's max_connections is 100 \(3 reserved, 10 open\): 87 free/,
    );
    expect(auto.note?.fields).toMatchObject({
      max: 100,
      reserved: 3,
      inUse: 10,
      free: 87,
      perProcess: 16,
      processes: 5,
      wanted: 8,
    });
    // A number asked for runs as asked (a pooler may stand in front), with the arithmetic.
    const asked = fitProcesses(8, false, 16, room);
    expect(asked.processes).toBe(8);
    expect(asked.note?.text).toMatch(
      /^8 sender processes may open 128 connections, and the server's max_connections is 100/,
    );
    expect(asked.note?.text).toContain(
      'Lower --processes or PAYHOOK_DB_POOL_SIZE, or raise max_connections.',
    );
    // No room even for one: auto keeps one and warns; so does a single process.
    const full = { max: 20, reserved: 3, inUse: 10 };
    const none = fitProcesses(4, true, 16, full);
    expect(none).toMatchObject({ processes: 1, note: { fields: { free: 7, processes: 1, wanted: 4 } } });
    expect(none.note?.text).toContain('Even one may run out');
    expect(fitProcesses(1, true, 16, full).note?.text).toMatch(/^1 sender process may open 16 connections/);
    // Unknown (PGlite, or a server that would not say): as wanted.
    expect(fitProcesses(8, true, 16, undefined)).toEqual({ processes: 8 });
  });
});
