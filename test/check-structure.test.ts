import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LAYERS, structureProblems } from '../scripts/check-structure.mjs';

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A repository of its own: `files` maps a path under `packages/` to its text. */
function repo(files: Record<string, string>): string {
  const base = mkdtempSync(join(tmpdir(), 'payhook-structure-'));
  made.push(base);
  for (const [path, text] of Object.entries(files)) {
    const file = join(base, 'packages', path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
  }
  return base;
}

const LAYERED = { sender: [['db', 'net'], ['delivery'], ['listen'], ['http']] };

describe('check-structure: the layers of a package', () => {
  it('refuses an import up a layer, however it is written', () => {
    const base = repo({
      'sender/src/delivery/worker.ts': 'export type WorkerLogger = { info(): void };\nexport const x = 1;\n',
      'sender/src/http/pagination.ts': 'export const microsColumn = 1;\n',
      'sender/src/listen/record.ts': 'export const cli = 1;\n',
      // type-only, a re-export, a dynamic import and an import spread over lines all count
      'sender/src/db/maintenance.ts': "import type { WorkerLogger } from '../delivery/worker.js';\n",
      'sender/src/listen/tail.ts': "export { microsColumn } from '../http/pagination.js';\n",
      'sender/src/delivery/sql/lock.ts': "export const load = () => import('../../listen/record.js');\n",
      'sender/src/net/guard.ts': "import {\n  x,\n} from '../delivery/worker';\n",
    });
    expect(structureProblems(base, LAYERED).sort()).toEqual([
      'packages/sender/src/db/maintenance.ts imports packages/sender/src/delivery/worker.ts: delivery/ is a layer above db/',
      'packages/sender/src/delivery/sql/lock.ts imports packages/sender/src/listen/record.ts: listen/ is a layer above delivery/',
      'packages/sender/src/listen/tail.ts imports packages/sender/src/http/pagination.ts: http/ is a layer above listen/',
      'packages/sender/src/net/guard.ts imports packages/sender/src/delivery/worker.ts: delivery/ is a layer above net/',
    ]);
  });

  it('lets a module import down, within its layer, and the top-level files of src either way', () => {
    const base = repo({
      'sender/src/errors.ts': 'export class ApiError {}\n',
      'sender/src/service.ts':
        "import { w } from './delivery/worker.js';\nimport { r } from './http/routes.js';\n",
      'sender/src/db/keyset.ts':
        "import { ApiError } from '../errors.js';\nimport { v } from '../net/vet.js';\n",
      'sender/src/net/vet.ts': 'export const v = 1;\n',
      'sender/src/delivery/worker.ts': "import { k } from '../db/keyset.js';\nexport const w = 1;\n",
      'sender/src/http/routes.ts':
        "import { w } from '../delivery/worker.js';\nimport { k } from '../db/keyset.js';\n",
    });
    expect(structureProblems(base, LAYERED)).toEqual([]);
  });

  it('names a directory that has no layer, and leaves packages without layers alone', () => {
    const base = repo({
      'sender/src/db/a.ts': 'export const a = 1;\n',
      'sender/src/endpoints/store.ts': "import { a } from '../db/a.js';\n",
      'core/src/receiver/queue.ts': "import { b } from '../store/memory.js';\n",
      'core/src/store/memory.ts': 'export const b = 1;\n',
    });
    expect(structureProblems(base, LAYERED)).toEqual([
      'packages/sender/src/endpoints/: no layer (add it to LAYERS here and to docs/architecture.md)',
    ]);
  });

  it("holds in this repository's sender, whose layers docs/architecture.md draws", () => {
    expect(LAYERS.sender?.flat()).toEqual(
      expect.arrayContaining([
        'db',
        'net',
        'signing',
        'auth',
        'delivery',
        'payments',
        'listen',
        'http',
        'dashboard',
      ]),
    );
    expect(structureProblems().filter((p) => p.includes('layer'))).toEqual([]);
  });
});
