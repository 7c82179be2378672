/**
 * The console's line diff (src/console/web/diff.ts): unchanged texts are all
 * "same", a changed line is a removal then an addition, insertions and
 * deletions keep the common lines and both line numberings, and applying the
 * diff to the old text gives the new one (checked on generated texts).
 */
import { describe, expect, it } from 'vitest';
import { diffLines, diffStats } from '../../src/console/web/diff.js';

const marks = (a: string, b: string) =>
  diffLines(a, b).map((l) => `${l.kind === 'same' ? ' ' : l.kind === 'add' ? '+' : '-'}${l.text}`);

describe('diffLines', () => {
  it('marks nothing in equal texts, and a final newline starts no line', () => {
    expect(marks('a\nb\n', 'a\nb\n')).toEqual([' a', ' b']);
    expect(marks('', '')).toEqual([]);
  });

  it('shows a changed line as removed then added, the rest kept', () => {
    expect(marks('version: 1\nlimit: 10\nend\n', 'version: 1\nlimit: 20\nend\n')).toEqual([
      ' version: 1',
      '-limit: 10',
      '+limit: 20',
      ' end',
    ]);
  });

  it('numbers lines in both texts', () => {
    const d = diffLines('a\nb\nc', 'a\nx\nb\nc');
    expect(d).toEqual([
      { kind: 'same', text: 'a', oldNo: 1, newNo: 1 },
      { kind: 'add', text: 'x', newNo: 2 },
      { kind: 'same', text: 'b', oldNo: 2, newNo: 3 },
      { kind: 'same', text: 'c', oldNo: 3, newNo: 4 },
    ]);
    expect(diffStats(diffLines('a\nb\nc', 'c\nd'))).toEqual({ added: 1, removed: 2 });
  });

  it('is minimal and rebuilds both texts (generated cases)', () => {
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    for (let k = 0; k < 200; k++) {
      const a = Array.from({ length: rnd(12) }, () => 'abcd'[rnd(4)]!);
      const b = Array.from({ length: rnd(12) }, () => 'abcd'[rnd(4)]!);
      const d = diffLines(a.join('\n'), b.join('\n'));
      expect(d.filter((l) => l.kind !== 'add').map((l) => l.text)).toEqual(a);
      expect(d.filter((l) => l.kind !== 'del').map((l) => l.text)).toEqual(b);
      // The kept lines are a longest common subsequence.
      const lcs = (x: string[], y: string[]): number => {
        const t = Array.from({ length: x.length + 1 }, () => new Array<number>(y.length + 1).fill(0));
        for (let i = 1; i <= x.length; i++)
          for (let j = 1; j <= y.length; j++)
            t[i]![j] = x[i - 1] === y[j - 1] ? t[i - 1]![j - 1]! + 1 : Math.max(t[i - 1]![j]!, t[i]![j - 1]!);
        return t[x.length]![y.length]!;
      };
      expect(d.filter((l) => l.kind === 'same').length).toBe(lcs(a, b));
    }
  });
});
