/**
 * The candidate nearest to `name` by edit distance (insertions, deletions, substitutions and
 * swaps of two neighbours, case ignored), if it is at most `maxDistance` away: the "did you mean"
 * of a misspelled event name or request field. Farther than that, a guess misleads more than it
 * helps, so there is none.
 */
export function closest(name: string, candidates: readonly string[], maxDistance = 3): string | undefined {
  const wanted = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = maxDistance + 1;
  for (const candidate of candidates) {
    const distance = editDistance(wanted, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Optimal string alignment distance: Levenshtein's, with a swap of two neighbours costing one. */
function editDistance(a: string, b: string): number {
  // Three rows: the swap looks two rows back.
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(
        (previous[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (previous[j - 1] as number) + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, (before[j - 2] as number) + 1);
      }
      row.push(d);
    }
    before = previous;
    previous = row;
  }
  return previous[b.length] as number;
}
