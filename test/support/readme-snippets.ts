import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** A code block of a README, where it is, and its code. */
export interface Snippet {
  /** The README's path from the repository root. */
  readme: string;
  /** The line of the block's first line of code (1-based). */
  line: number;
  code: string;
  /**
   * A file name for it: `<readme dir>-<line>.mts`, or `.cts` for a block whose first line names a
   * `.cts` file (`// server.cts`): CommonJS, as a merchant's CommonJS project compiles it.
   */
  name: string;
}

/** The READMEs and guides whose TypeScript and JavaScript blocks a merchant copies. */
export const SNIPPET_READMES = [
  'README.md',
  'docs/receivers.md',
  'docs/web-runtimes.md',
  'docs/security.md',
  'docs/observability.md',
  'docs/sender.md',
  'packages/core/README.md',
  'packages/express/README.md',
  'packages/koa/README.md',
  'packages/fastify/README.md',
  'packages/web/README.md',
  'packages/redis/README.md',
  'packages/postgres/README.md',
  'docs/stores.md',
  'packages/sender/README.md',
];

/** Every ```ts and ```js block of the READMEs, from the repository at `root`. */
export function readSnippets(root: string, readmes = SNIPPET_READMES): Snippet[] {
  const out: Snippet[] = [];
  for (const readme of readmes) {
    const lines = readFileSync(join(root, readme), 'utf8').split('\n');
    let start = -1;
    lines.forEach((text, i) => {
      if (start < 0 && /^```(ts|js|typescript|javascript)\s*$/.test(text)) start = i + 1;
      else if (start >= 0 && /^```\s*$/.test(text)) {
        // root-12.mts, core-12.mts (packages/core/README.md), docs-receivers-12.mts.
        const dir =
          readme === 'README.md'
            ? 'root'
            : readme.startsWith('docs/')
              ? `docs-${readme.slice(5, -3)}`
              : (readme.split('/')[1] as string);
        const code = lines.slice(start, i).join('\n');
        const extension = /^\/\/ \S+\.cts\b/.test(code) ? 'cts' : 'mts';
        out.push({ readme, line: start + 1, code, name: `${dir}-${start + 1}.${extension}` });
        start = -1;
      }
    });
  }
  return out;
}

/**
 * What a snippet takes from the reader's own code: the functions its handlers call, the request
 * and body a verifier has at hand, a test's app. Declared with the types a merchant's code would
 * have, so that everything payhook's API gives and takes is still checked.
 */
export const SNIPPET_CONTEXT = `import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Payment, Receiver } from '@payhook/core';

declare global {
  function markOrderPaid(orderIdentifier: string, amount: number): Promise<void>;
  function notifyCustomer(email: string): Promise<void>;
  function recordSession(payment: Payment): Promise<void>;
  function recordRefund(data: unknown): Promise<void>;
  function fulfilOrder(orderIdentifier: string, options: { idempotencyKey: string; signal: AbortSignal }): Promise<void>;
  function notify(email: string): Promise<void>;
  function alert(message: string): void;
  const log: { warn(fields: object): void; error(fields: object): void };
  /** The raw body as received, and the request and response it came with. */
  const rawBody: string;
  const req: IncomingMessage & { raw: IncomingMessage; ip: string; rawBody?: Buffer; body?: unknown; bodyWasRead: boolean };
  const res: ServerResponse;
  /** An error a framework hands to its error handler. */
  const error: unknown;
  type MyRequest = typeof req;
  const receiver: Receiver;
  const payment: Payment;
  const businessId: string;
  const secret: string;
  const eventId: string;
  const body: string;
  const url: string;
  /** supertest's request(app), in a test. */
  function request(app: unknown): { post(path: string): { set(headers: object): { send(body: string): Promise<{ status: number }> } } };
  const app: unknown;
  /** The runtimes' globals the Web-standard quickstarts use (their own type packages have them). */
  const Bun: {
    serve(options: { port?: number; fetch(request: Request, server: unknown): Promise<Response> }): unknown;
  };
  const Deno: {
    serve(options: { port?: number }, handler: (request: Request, info: unknown) => Promise<Response>): unknown;
  };
  interface ExecutionContext {
    waitUntil(promise: Promise<unknown>): void;
  }
  interface DurableObjectNamespace {
    idFromName(name: string): unknown;
  }
}
export {};
`;
