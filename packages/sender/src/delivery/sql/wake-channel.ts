import { sql } from 'kysely';
import { WAKE_MARK } from '../../db/wake.js';

/**
 * The channel on which committed deliveries wake the workers of other instances (`db/wake.ts`).
 */
export { WAKE_CHANNEL } from '../../db/wake.js';

/** The wake mark as a column name, for a statement that computes it (true: wake the workers). */
export const WAKE_COLUMN = sql.raw(WAKE_MARK);

/**
 * The column a statement that writes due deliveries selects (`select ${WAKE} where ...`): its
 * connection wakes the delivery workers once its transaction commits, instead of a NOTIFY in the
 * transaction (`db/wake.ts`).
 */
export const WAKE = sql`true as ${WAKE_COLUMN}`;
