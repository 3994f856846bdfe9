import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LAYERS, structureProblems, WRITERS } from '../scripts/check-structure.mjs';

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
        'endpoints',
        'payments',
        'listen',
        'http',
        'dashboard',
      ]),
    );
    expect(structureProblems().filter((p) => p.includes('layer'))).toEqual([]);
  });
});

describe('check-structure: the tables with one writer', () => {
  it('refuses a statement that writes deliveries or webhook_endpoints outside their owners, however it is written', () => {
    const base = repo({
      'sender/src/delivery/sql/set-due.ts': 'const s = sql`update deliveries set x = 1`;\n',
      'sender/src/delivery/delivery-state.ts': "export { s } from './sql/set-due.js';\n",
      'sender/src/endpoints/store.ts': "const q = db.updateTable('webhook_endpoints');\n",
      'sender/src/db/migrations/0001.ts': 'const m = sql`insert into webhook_endpoints (url) values (1)`;\n',
      // the query builder, raw SQL over lines and in any case, a CTE's delete all count
      'sender/src/endpoints/lifecycle.ts': "await tx\n  .updateTable(\n    'deliveries'\n  ).set({});\n",
      'sender/src/listen/record.ts': 'sql`with d as (\n  INSERT INTO\n   deliveries (id) select 1)`;\n',
      'sender/src/delivery/rate-limit.ts': 'sql`with t as (update webhook_endpoints e set n = 1)`;\n',
      'sender/src/http/settings.ts': "db.deleteFrom('webhook_endpoints');\nsql`delete from deliveries`;\n",
    });
    expect(structureProblems(base).sort()).toEqual([
      'packages/sender/src/delivery/rate-limit.ts writes webhook_endpoints (only endpoints/, db/migrations.ts, db/migrations/ may)',
      'packages/sender/src/endpoints/lifecycle.ts writes deliveries (only delivery/sql/, delivery/delivery-state.ts may)',
      'packages/sender/src/http/settings.ts writes deliveries (only delivery/sql/, delivery/delivery-state.ts may)',
      'packages/sender/src/http/settings.ts writes webhook_endpoints (only endpoints/, db/migrations.ts, db/migrations/ may)',
      'packages/sender/src/listen/record.ts writes deliveries (only delivery/sql/, delivery/delivery-state.ts may)',
    ]);
  });

  it('lets any module read the tables, and prose name a statement it does not run', () => {
    const base = repo({
      'sender/src/http/health.ts':
        "db.selectFrom('deliveries');\nsql`select 1 from webhook_endpoints for update`;\nsql`select updated_at from deliveries_archive`;\n",
      'sender/src/listen/tail.ts':
        "// never: update deliveries set x\n/**\n * insert into webhook_endpoints is the lifecycle's\n */\nexport const t = 1;\n",
    });
    expect(structureProblems(base)).toEqual([]);
  });

  it("holds in this repository's sender", () => {
    expect(Object.keys(WRITERS.sender ?? {})).toEqual(['deliveries', 'webhook_endpoints']);
    expect(structureProblems().filter((p) => p.includes(' writes '))).toEqual([]);
  });
});
