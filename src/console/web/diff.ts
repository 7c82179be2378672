/**
 * A line diff of two texts (the pending policy against the one in force):
 * the longest common subsequence of their lines, the rest removed (`-`,
 * only in the old text) or added (`+`, only in the new). Pure: no DOM.
 */

export type DiffKind = 'same' | 'add' | 'del';

export interface DiffLine {
  kind: DiffKind;
  text: string;
  /** 1-based line number in the old text (same, del) and the new one (same, add). */
  oldNo?: number;
  newNo?: number;
}

/** Past this many cells the table is not built: the whole old text is shown removed, the new added. */
const MAX_CELLS = 4_000_000;

function lines(text: string): string[] {
  if (text === '') return [];
  const all = text.replace(/\r\n?/g, '\n').split('\n');
  // A final newline ends the last line; it does not start an empty one.
  if (all.at(-1) === '') all.pop();
  return all;
}

/** The lines of `after` against `before`, in order, each marked same, add or del. */
export function diffLines(before: string, after: string): DiffLine[] {
  const a = lines(before);
  const b = lines(after);
  // Common head and tail lines need no table.
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  )
    tail++;
  const out: DiffLine[] = [];
  for (let i = 0; i < head; i++) out.push({ kind: 'same', text: a[i]!, oldNo: i + 1, newNo: i + 1 });
  const am = a.slice(head, a.length - tail);
  const bm = b.slice(head, b.length - tail);
  const n = am.length;
  const m = bm.length;
  if (n * m > MAX_CELLS) {
    for (const [i, text] of am.entries()) out.push({ kind: 'del', text, oldNo: head + i + 1 });
    for (const [j, text] of bm.entries()) out.push({ kind: 'add', text, newNo: head + j + 1 });
  } else {
    // len[i][j]: the LCS length of am[i..] and bm[j..], in one flat array.
    const w = m + 1;
    const len = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--)
      for (let j = m - 1; j >= 0; j--)
        len[i * w + j] =
          am[i] === bm[j]
            ? len[(i + 1) * w + j + 1]! + 1
            : Math.max(len[(i + 1) * w + j]!, len[i * w + j + 1]!);
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && am[i] === bm[j]) {
        out.push({ kind: 'same', text: am[i]!, oldNo: head + i + 1, newNo: head + j + 1 });
        i++;
        j++;
      } else if (i < n && (j === m || len[(i + 1) * w + j]! >= len[i * w + j + 1]!)) {
        // Removed lines before added ones where either order keeps the LCS.
        out.push({ kind: 'del', text: am[i]!, oldNo: head + i + 1 });
        i++;
      } else {
        out.push({ kind: 'add', text: bm[j]!, newNo: head + j + 1 });
        j++;
      }
    }
  }
  for (let k = 0; k < tail; k++) {
    const oi = a.length - tail + k;
    const ni = b.length - tail + k;
    out.push({ kind: 'same', text: a[oi]!, oldNo: oi + 1, newNo: ni + 1 });
  }
  return out;
}

/** How many lines were added and removed. */
export function diffStats(d: readonly DiffLine[]): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const l of d) {
    if (l.kind === 'add') added++;
    else if (l.kind === 'del') removed++;
  }
  return { added, removed };
}
