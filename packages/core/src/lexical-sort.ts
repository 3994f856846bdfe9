import type { PayhookError } from './errors.js';

/** Objects with more members than this are sorted with Array#sort rather than by insertion. */
const INSERTION_SORT_MAX = 32;

/**
 * Sorts the `count` member indices at `order` in `tape` by key (`compare`), refusing equal keys
 * (`duplicateAt` makes the error of a member whose key came before): by binary insertion (a key
 * equal to one already placed is always compared with it), or for larger objects with Array#sort
 * and a look at neighbours.
 */
export function sortMembers(
  tape: Int32Array,
  order: number,
  count: number,
  compare: (a: number, b: number) => number,
  duplicateAt: (member: number) => PayhookError,
): void {
  if (count <= INSERTION_SORT_MAX) {
    for (let k = order + 1; k < order + count; k++) {
      const member = tape[k] as number;
      let lo = order;
      let hi = k;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        const cmp = compare(member, tape[mid] as number);
        if (cmp === 0) throw duplicateAt(member);
        if (cmp < 0) hi = mid;
        else lo = mid + 1;
      }
      for (let j = k; j > lo; j--) tape[j] = tape[j - 1] as number;
      tape[lo] = member;
    }
    return;
  }
  const list = Array.from(tape.subarray(order, order + count));
  list.sort(compare);
  for (let k = 1; k < count; k++) {
    if (compare(list[k - 1] as number, list[k] as number) === 0) throw duplicateAt(list[k] as number);
  }
  tape.set(list, order);
}
