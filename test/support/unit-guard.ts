// Set up before every file of `pnpm test:unit` (vitest.config.ts): a file that reaches for a child
// process or a test service without declaring its tag fails at once, with the tag it should declare,
// instead of passing on a machine that happens to have Redis or PostgreSQL running.
import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';

const refuse = (what: string, tag: string) => () => {
  throw new Error(`${what} in a unit test: declare "// @module-tag ${tag}" at the top of the test file`);
};

const processes = ['spawn', 'spawnSync', 'fork', 'exec', 'execSync', 'execFile', 'execFileSync'];
for (const name of processes) {
  (childProcess as unknown as Record<string, unknown>)[name] = refuse(`child_process.${name}`, 'process');
}
// `import { spawn } from 'node:child_process'` reads the patched functions too.
syncBuiltinESMExports();

// Names that cannot resolve (RFC 6761), so a connection fails at once and says why.
process.env.TEST_REDIS_URL = 'redis://unit-tests-use-no-redis.invalid:6379';
process.env.TEST_DATABASE_URL = 'postgres://postgres@unit-tests-use-no-postgresql.invalid:5432/test';
// The sender's tests run on PGlite alone here (testStorages() in its test fixtures).
process.env.PAYHOOK_TEST_UNIT = '1';
