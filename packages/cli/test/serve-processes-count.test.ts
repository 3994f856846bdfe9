import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { autoProcesses, databaseOnThisMachine, processCount } from '../src/commands/serve-processes.js';

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
});
