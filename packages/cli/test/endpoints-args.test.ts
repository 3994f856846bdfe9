import { describe, expect, it } from 'vitest';
import { CliError } from '../src/command.js';
import { timeOf } from '../src/commands/endpoints.js';

describe('payhook endpoints recover: the times it takes', () => {
  const now = new Date('2026-11-27T12:00:00.000Z');

  it('reads 30m, 12h and 3d as that long before now, and passes ISO 8601 on as typed', () => {
    expect(timeOf('30m', '--since', now)).toBe('2026-11-27T11:30:00.000Z');
    expect(timeOf('12h', '--since', now)).toBe('2026-11-27T00:00:00.000Z');
    expect(timeOf('3d', '--until', now)).toBe('2026-11-24T12:00:00.000Z');
    expect(timeOf('2026-11-20T08:00:00+01:00', '--since', now)).toBe('2026-11-20T08:00:00+01:00');
  });

  it('refuses anything else as bad usage, naming the option', () => {
    for (const value of ['yesterday', '3 days', '-3d', '3w', '']) {
      expect(() => timeOf(value, '--since', now), value).toThrow(CliError);
      expect(() => timeOf(value, '--since', now), value).toThrow(/^--since must be an ISO 8601 time/);
    }
  });
});
