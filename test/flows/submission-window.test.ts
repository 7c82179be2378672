/**
 * Until when a recorded submission may still commit (src/flows/withdrawal-run.ts
 * `openUntil`): its transaction's window plus two minutes (the ledger-time
 * tolerance and clock skew); without a readable window (rows of older
 * builds) the preparation-time tolerance from when it was sent — never "closed".
 */
import { describe, expect, it } from 'vitest';
import { openUntil, SETTLE_MARGIN_MS } from '../../src/flows/withdrawal-run.js';
import type { SubmissionRecord } from '../../src/store/repos/artifacts.js';

const sent = '2026-11-26T10:00:00.000Z';
const sub = (commitDeadline?: string): SubmissionRecord => ({
  submissionId: 's',
  commandId: 'c',
  outcome: 'ambiguous',
  createdAt: sent,
  updatedAt: sent,
  ...(commitDeadline !== undefined ? { commitDeadline } : {}),
});

describe('openUntil', () => {
  it('is the window plus the ledger-time tolerance and as much for clock skew', () => {
    expect(SETTLE_MARGIN_MS).toBe(120_000);
    expect(openUntil(sub('2026-11-26T10:05:00.000Z'))).toBe(Date.parse('2026-11-26T10:07:00.000Z'));
  });

  it('without a window, or with one that cannot be read: 24 h after it was sent, plus the margin', () => {
    const day = Date.parse(sent) + 24 * 3600_000 + 120_000;
    expect(openUntil(sub())).toBe(day);
    expect(openUntil(sub('not a time'))).toBe(day);
  });
});
