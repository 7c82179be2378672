/**
 * The sandbox ledger's active contract set as of an offset: for any history of
 * commits (creates and archives over several parties, node ids out of order)
 * and rejections (which take offsets of their own), `activeAt` at every offset,
 * for everyone and for each party, equals a replay of the update log from its
 * start — the definition — in the same creation order.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Contract, LedgerStore, type NewContract } from '../../src/sandbox/ledger/store.js';

const PARTIES = ['alice::1220aa', 'bob::1220bb', 'carol::1220cc'];
const TEMPLATE = { packageId: 'pkg', moduleName: 'M', entityName: 'T' };

/** The definition: replay every update up to `offset`, keep `party`'s. */
function replayAt(store: LedgerStore, offset: number, party?: string): string[] {
  const out = new Map<string, Contract>();
  for (const u of store.updates(0, offset))
    for (const e of u.events) {
      if (e.kind === 'created') out.set(e.contract.contractId, e.contract);
      else out.delete(e.contract.contractId);
    }
  return [...out.values()]
    .filter((c) => party === undefined || c.stakeholders.includes(party))
    .map((c) => c.contractId);
}

type Step =
  | { kind: 'commit'; creates: { parties: number[]; node: number }[]; archives: number[] }
  | { kind: 'reject' };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    arbitrary: fc.record({
      kind: fc.constant('commit' as const),
      creates: fc.array(
        fc.record({
          parties: fc.uniqueArray(fc.integer({ min: 0, max: PARTIES.length - 1 }), {
            minLength: 1,
            maxLength: 3,
          }),
          node: fc.integer({ min: 0, max: 20 }),
        }),
        { maxLength: 4 },
      ),
      archives: fc.array(fc.nat(), { maxLength: 3 }),
    }),
    weight: 5,
  },
  { arbitrary: fc.record({ kind: fc.constant('reject' as const) }), weight: 1 },
);

describe('sandbox ledger: active contracts as of an offset', () => {
  it('equals a replay of the log, at every offset, for everyone and for each party', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 30 }), (steps) => {
        const store = new LedgerStore();
        let n = 0;
        for (const s of steps) {
          if (s.kind === 'reject') {
            store.complete({
              commandId: 'c',
              submissionId: 's',
              userId: 'u',
              actAs: [],
              updateId: undefined,
              status: { code: 9, message: 'no' },
              recordTime: 0n,
              synchronizerId: 'sync',
            });
            continue;
          }
          const active = store.activeAt(store.ledgerEnd());
          const archives = [...new Set(active.length > 0 ? s.archives.map((i) => i % active.length) : [])];
          const nodes = new Set<number>();
          const creates: NewContract[] = s.creates
            .filter((c) => !nodes.has(c.node) && nodes.add(c.node))
            .map((c) => ({
              contractId: `cid-${n++}`,
              templateId: TEMPLATE,
              packageName: 'p',
              argument: { kind: 'unit' },
              signatories: [PARTIES[c.parties[0]!]!],
              stakeholders: c.parties.map((i) => PARTIES[i]!),
              nodeId: c.node,
            }));
          store.commit({
            commandId: 'c',
            actAs: [],
            recordTime: 0n,
            effectiveAt: 0n,
            synchronizerId: 'sync',
            archives: archives.map((i, k) => ({ contractId: active[i]!.contractId, nodeId: 100 + k })),
            creates,
          });
        }
        for (let offset = 0; offset <= store.ledgerEnd(); offset++) {
          expect(store.activeAt(offset).map((c) => c.contractId)).toEqual(replayAt(store, offset));
          for (const p of PARTIES)
            expect(store.activeAt(offset, p).map((c) => c.contractId)).toEqual(replayAt(store, offset, p));
        }
      }),
      { numRuns: 300 },
    );
  });
});
