/**
 * Where to re-read from after a restore, over a scripted history: the
 * largest offset whose transaction or checkpoint is before `T − 1 µs` (an
 * update exactly 1 µs before T is read again), only the named
 * synchronizer's times when one is named, the walk stopping at the first
 * time past the bound; 0 when nothing is earlier; imports recognised by
 * their record time; a record time that does not parse refused.
 */
import { describe, expect, it } from 'vitest';
import type { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import type { Update } from '../../src/canton/ledger-api/schemas.js';
import { isImportTransaction, resumePointBefore } from '../../src/exchange/resume-point.js';

const A = 'sync-a::1220';
const B = 'sync-b::1220';
const tx = (offset: number, recordTime: string, synchronizerId = A): Update =>
  ({
    Transaction: { value: { updateId: `u${offset}`, offset, recordTime, synchronizerId, events: [] } },
  }) as never;
const checkpoint = (offset: number, times: [string, string][]): Update =>
  ({
    OffsetCheckpoint: {
      value: {
        offset,
        synchronizerTimes: times.map(([synchronizerId, recordTime]) => ({ synchronizerId, recordTime })),
      },
    },
  }) as never;

/** A ledger client whose history is `items`; counts what was read. */
function ledger(items: Update[]) {
  const seen = { count: 0 };
  const client = {
    async *updatesPaged() {
      for (const u of items) {
        seen.count++;
        yield u;
      }
    },
  } as unknown as LedgerApiClient;
  return { client, seen };
}

const history = [
  tx(1, '2026-01-01T00:00:01Z'),
  tx(2, '2026-01-01T00:00:02Z'),
  checkpoint(4, [[A, '2026-01-01T00:00:02.500000Z']]),
  tx(5, '2026-01-01T00:00:02.999999Z'),
  tx(6, '2026-01-01T00:00:03Z'),
  tx(7, '2026-01-01T00:00:04Z'),
];

describe('the offset to re-read from', () => {
  it('is the largest offset before T − 1 µs; an update 1 µs before T is read again', async () => {
    const { client, seen } = ledger(history);
    const r = await resumePointBefore(client, { parties: ['p::1'], recordTime: '2026-01-01T00:00:03Z' });
    expect(r.offset).toBe(4);
    expect(r.recordTime).toBe('2026-01-01T00:00:02.500000Z');
    expect(r.firstAtOrAfter).toEqual({ offset: 5, recordTime: '2026-01-01T00:00:02.999999Z' });
    // One synchronizer: the walk stops at the first record time at or past the bound.
    expect(seen.count).toBe(4);
  });

  it('is 0 when nothing is earlier, and the whole history when everything is', async () => {
    expect(
      (
        await resumePointBefore(ledger(history).client, {
          parties: ['p'],
          recordTime: '2026-01-01T00:00:01Z',
        })
      ).offset,
    ).toBe(0);
    const all = await resumePointBefore(ledger(history).client, {
      parties: ['p'],
      recordTime: '2027-01-01T00:00:00Z',
    });
    expect(all).toMatchObject({ offset: 7, scanned: 6 });
  });

  it("counts only the named synchronizer's times; a checkpoint counts when all its times are before", async () => {
    const mixed = [
      tx(1, '2026-01-01T00:00:01Z', A),
      tx(2, '2026-01-01T00:00:09Z', B),
      tx(3, '2026-01-01T00:00:02Z', A),
      checkpoint(4, [
        [A, '2026-01-01T00:00:02Z'],
        [B, '2026-01-01T00:00:09Z'],
      ]),
      tx(5, '2026-01-01T00:00:06Z', A),
    ];
    const onA = await resumePointBefore(ledger(mixed).client, {
      parties: ['p'],
      recordTime: '2026-01-01T00:00:05Z',
      synchronizerId: A,
    });
    expect(onA.offset).toBe(4);
    // Without a synchronizer: B's later time does not stop the walk, the mixed checkpoint does not count.
    const any = await resumePointBefore(ledger(mixed).client, {
      parties: ['p'],
      recordTime: '2026-01-01T00:00:05Z',
    });
    expect(any.offset).toBe(3);
    expect(any.scanned).toBe(5);
  });

  it('refuses a record time that does not parse, and an empty book', async () => {
    await expect(
      resumePointBefore(ledger(history).client, { parties: ['p'], recordTime: 'yesterday' }),
    ).rejects.toThrow(/not an ISO-8601 instant/);
    await expect(
      resumePointBefore(ledger(history).client, { parties: [], recordTime: '2026-01-01T00:00:00Z' }),
    ).rejects.toThrow(/book is empty/);
  });

  it('recognises the import transactions of a major upgrade by their record time', () => {
    expect(isImportTransaction({ recordTime: '0001-01-01T00:00:00.000000Z' })).toBe(true);
    expect(isImportTransaction({ recordTime: '0001-01-01T00:00:00Z' })).toBe(true);
    expect(isImportTransaction({ recordTime: '0001-01-01T00:00:00.000001Z' })).toBe(false);
    expect(isImportTransaction({ recordTime: '2026-01-01T00:00:00Z' })).toBe(false);
  });
});
