// The end of a handler's transaction: the done mark and COMMIT in one round trip. The mark is a
// statement prepared once per connection (PREPARE, with the transaction's BEGIN) and run with
// EXECUTE in the same simple query as COMMIT; a guard makes it fail when the owner no longer holds
// the event, so that COMMIT never runs and the transaction is rolled back.
import { createHash } from 'node:crypto';
import type { OrderedCompletion } from '@payhook/core';
import type { PoolClient } from 'pg';
import { objectId } from './order.js';
import { isPrepared, textLiteral as literal, markPrepared, numberLiteral } from './prepared.js';
import { NOT_HELD } from './statements.js';

/** The guarded marks: `plain` ($1 key, $2 owner, $3 retentionMs) and `ordered` (+ $4 object id, $5 rank). */
export interface DoneMarks {
  plain: string;
  ordered: string;
}

/** The start and the end of a handler's transaction, for the marks of one inbox. */
export function createCommitter(marks: DoneMarks) {
  const name = (label: string, text: string) =>
    `payhook_${label}_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
  const plain = name('mark', marks.plain);
  const ordered = name('ordered_mark', marks.ordered);
  const prepare = `PREPARE ${plain} (text, text, bigint) AS ${marks.plain};
PREPARE ${ordered} (text, text, bigint, text, double precision) AS ${marks.ordered};`;

  return {
    /** What opens the transaction: BEGIN, after the marks' PREPARE on a connection that lacks them. */
    opening(client: PoolClient): string {
      return isPrepared(client, plain) ? 'BEGIN' : `${prepare}\nBEGIN`;
    },

    /** Records that `client` ran {@link opening}'s text (and so has the marks prepared). */
    opened(client: PoolClient): void {
      markPrepared(client, plain);
    },

    /**
     * Marks the event done (with per-object order, the rank raised and the lock freed too) and
     * commits, in one round trip. False, rolled back, if `owner` no longer held `key`.
     */
    async commitDone(
      client: PoolClient,
      retentionMs: number,
      key: string,
      owner: string,
      order: OrderedCompletion | undefined,
    ): Promise<boolean> {
      const args =
        order === undefined
          ? `${plain}(${literal(client, key)}, ${literal(client, owner)}, ${retentionMs})`
          : `${ordered}(${literal(client, key)}, ${literal(client, owner)}, ${retentionMs}, ${literal(
              client,
              objectId(key, order.object),
            )}, ${numberLiteral(order.rank)})`;
      try {
        await client.query(`EXECUTE ${args};\nCOMMIT`);
        return true;
      } catch (error) {
        if (!String((error as Error).message).includes(NOT_HELD)) throw error;
        await client.query('ROLLBACK');
        return false;
      }
    },
  };
}
