/**
 * The sandbox participant through a restore from a backup and a major
 * upgrade. Restore: every transaction after the backup comes back with the
 * same update id, record time and contracts under a new offset (shifted by a
 * gap, or compacted where rejections had taken offsets), the ledger goes on
 * from the new end, and the active contracts as of every offset still equal a
 * replay of the log. Upgrade: offsets start again at 1 with one import
 * transaction per active contract at record time 0001-01-01T00:00:00Z (same
 * contract ids), the old history is gone, new transactions follow.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerStore } from '../../src/sandbox/ledger/store.js';
import { VALIDATOR_USER } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';

// biome-ignore lint/suspicious/noExplicitAny: plain JSON navigation over the answers
type Body = any;

let sb: RunningSandbox;

beforeAll(async () => {
  sb = await startSandbox({
    seed: 'participant-recovery',
    timers: false,
    auth: { tokens: { 'validator-token': VALIDATOR_USER } },
  });
});
afterAll(async () => {
  await sb.close();
});

async function post(path: string, body: unknown = {}): Promise<{ status: number; body: Body }> {
  const r = await fetch(`${sb.urls.ledgerApi}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer validator-token' },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

const party = () => sb.ctx.net.validatorParty;
const format = () => ({
  includeTransactions: {
    eventFormat: { filtersByParty: { [party()]: {} }, verbose: false },
    transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
  },
});

interface Seen {
  updateId: string;
  offset: number;
  recordTime: string;
  created: string[];
}

/** Every transaction the validator party sees after `begin`, through the HTTP list. */
async function history(begin = 0): Promise<Seen[]> {
  const end = sb.ctx.net.store.ledgerEnd();
  if (end <= begin) return [];
  const r = await post('/v2/updates?limit=1000', {
    beginExclusive: begin,
    endInclusive: end,
    updateFormat: format(),
  });
  expect(r.status).toBe(200);
  return (r.body as Body[])
    .filter((e) => e.update.Transaction)
    .map((e) => {
      const t = e.update.Transaction.value;
      return {
        updateId: t.updateId,
        offset: t.offset,
        recordTime: t.recordTime,
        created: t.events.filter((x: Body) => x.CreatedEvent).map((x: Body) => x.CreatedEvent.contractId),
      };
    });
}

async function tap(amount = '10'): Promise<string> {
  const r = await post('/sandbox/tap', { party: party(), amount });
  expect(r.status).toBe(200);
  return r.body.contractId;
}

/** A rejected command: it takes an offset of its own, which a restore does not replay. */
function reject(): number {
  const net = sb.ctx.net;
  return net.store.complete({
    commandId: 'refused',
    submissionId: 's',
    userId: 'u',
    actAs: [party()],
    updateId: undefined,
    status: { code: 9, message: 'refused' },
    recordTime: net.clock.now(),
    synchronizerId: net.synchronizerId,
  }).offset;
}

describe('restore from a backup', () => {
  it('brings back every later transaction, same id and record time, under new offsets', async () => {
    await tap('1');
    const keep = sb.ctx.net.store.ledgerEnd();
    await tap('2');
    reject();
    await tap('3');
    reject();
    await tap('4');
    const before = await history(keep);
    expect(before).toHaveLength(3);

    // Compaction: the two rejections' offsets are not replayed.
    const r = await post('/sandbox/participant/restore', { keepUntilOffset: keep });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ keptUntilOffset: keep, renumbered: 3, droppedRejections: 2 });
    expect(r.body.firstRenumberedOffset).toBe(keep + 1);
    expect(r.body.ledgerEnd).toBe(keep + 3);
    const after = await history(keep);
    expect(after.map((s) => [s.updateId, s.recordTime, s.created])).toEqual(
      before.map((s) => [s.updateId, s.recordTime, s.created]),
    );
    expect(after.map((s) => s.offset)).toEqual([keep + 1, keep + 2, keep + 3]);
    expect(before.map((s) => s.offset)).toEqual([keep + 1, keep + 3, keep + 5]);
    // The offset stored before the restore now names another transaction.
    const stale = await post('/v2/updates/update-by-offset', {
      offset: (before[1] as Seen).offset,
      updateFormat: format(),
    });
    expect(stale.status).toBe(200);
    expect(stale.body.update.Transaction.value.updateId).toBe((before[2] as Seen).updateId);
    // Update ids still find their transaction, at its new offset.
    const byId = await post('/v2/updates/update-by-id', {
      updateId: (before[1] as Seen).updateId,
      updateFormat: format(),
    });
    expect(byId.body.update.Transaction.value.offset).toBe(keep + 2);
    // The ledger end the participant reports, and what comes next.
    const end = await fetch(`${sb.urls.ledgerApi}/v2/state/ledger-end`, {
      headers: { authorization: 'Bearer validator-token' },
    }).then((x) => x.json() as Promise<Body>);
    expect(end.offset).toBe(keep + 3);
    await tap('5');
    expect((await history(keep + 3)).map((s) => s.offset)).toEqual([keep + 4]);
  });

  it('shifts the later offsets by a gap', async () => {
    const keep = sb.ctx.net.store.ledgerEnd() - 2;
    const before = await history(keep);
    const r = await post('/sandbox/participant/restore', { keepUntilOffset: keep, gap: 100 });
    expect(r.body).toMatchObject({ renumbered: 2, droppedRejections: 0, firstRenumberedOffset: keep + 101 });
    const after = await history(keep);
    expect(after.map((s) => s.updateId)).toEqual(before.map((s) => s.updateId));
    expect(after.map((s) => s.offset)).toEqual(before.map((s) => s.offset + 100));
    // Nothing at the offsets the transactions had.
    const gone = await post('/v2/updates/update-by-offset', {
      offset: (before[0] as Seen).offset,
      updateFormat: format(),
    });
    expect(gone.status).toBe(404);
    // The active contracts as of an offset follow the new numbering.
    const acs = await post('/v2/state/active-contracts', {
      activeAtOffset: keep + 101,
      eventFormat: { filtersByParty: { [party()]: {} }, verbose: false },
    });
    expect(acs.status).toBe(200);
    const ids = (acs.body as Body[]).map((e) => e.contractEntry.JsActiveContract.createdEvent.contractId);
    expect(ids).toEqual(expect.arrayContaining((after[0] as Seen).created));
    expect(ids).not.toEqual(expect.arrayContaining((after[1] as Seen).created));
  });

  it('refuses a backup offset past the ledger end, and a negative gap', async () => {
    const end = sb.ctx.net.store.ledgerEnd();
    const r = await post('/sandbox/participant/restore', { keepUntilOffset: end + 1 });
    expect(r.status).toBe(400);
    expect(r.body.error).toContain(`past the ledger end ${end}`);
    const g = await post('/sandbox/participant/restore', { gap: -1 });
    expect(g.status).toBe(400);
    expect(g.body.error).toMatch(/^gap:/);
    expect(sb.ctx.net.store.ledgerEnd()).toBe(end);
  });

  it('keeps the active contracts as of every offset equal to a replay of the log', () => {
    const store = new LedgerStore();
    const mk = (id: string, nodeId = 0) => ({
      contractId: id,
      templateId: { packageId: 'p', moduleName: 'M', entityName: 'T' },
      packageName: 'p',
      argument: { kind: 'unit' as const },
      signatories: ['a::1'],
      stakeholders: ['a::1'],
      nodeId,
    });
    const commit = (archives: string[], creates: string[]) =>
      store.commit({
        commandId: 'c',
        actAs: [],
        recordTime: 0n,
        effectiveAt: 0n,
        synchronizerId: 's',
        archives: archives.map((contractId, i) => ({ contractId, nodeId: 10 + i })),
        creates: creates.map((c, i) => mk(c, i)),
      });
    const rejection = () =>
      store.complete({
        commandId: 'x',
        submissionId: 'x',
        userId: 'u',
        actAs: [],
        updateId: undefined,
        status: { code: 9, message: 'no' },
        recordTime: 0n,
        synchronizerId: 's',
      });
    commit([], ['c1', 'c2']);
    rejection();
    commit(['c1'], ['c3']);
    rejection();
    commit(['c2', 'c3'], ['c4']);
    commit([], ['c5']);
    store.renumberAfter(1, 0);
    const replay = (offset: number) => {
      const live = new Map<string, true>();
      for (const u of store.updates(0, offset))
        for (const e of u.events)
          if (e.kind === 'created') live.set(e.contract.contractId, true);
          else live.delete(e.contract.contractId);
      return [...live.keys()];
    };
    expect(store.updates().map((u) => u.offset)).toEqual([1, 2, 3, 4]);
    for (let o = 0; o <= store.ledgerEnd(); o++)
      expect(store.activeAt(o).map((c) => c.contractId)).toEqual(replay(o));
    expect(store.completions(0)).toEqual([]);
  });
});

describe('major upgrade', () => {
  it('starts offsets again with the active contracts imported at 0001-01-01, then goes on', async () => {
    const net = sb.ctx.net;
    const oldTx = (await history())[0] as Seen;
    const active = net.store.activeContracts().map((c) => c.contractId);
    const mine = new Set(
      net.store
        .activeContracts()
        .filter((c) => c.stakeholders.includes(party()))
        .map((c) => c.contractId),
    );
    const r = await post('/sandbox/participant/major-upgrade');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      migrationId: 1,
      imported: active.length,
      importRecordTime: '0001-01-01T00:00:00.000000Z',
      ledgerEnd: active.length,
    });
    const imported = await history();
    expect(imported.every((s) => s.recordTime === '0001-01-01T00:00:00.000000Z')).toBe(true);
    expect(new Set(imported.flatMap((s) => s.created))).toEqual(mine);
    expect(imported.map((s) => s.offset)).toEqual([...imported.map((s) => s.offset)].sort((a, b) => a - b));
    expect(net.store.activeContracts().map((c) => c.contractId)).toEqual(active);
    // The history before the upgrade is gone.
    const old = await post('/v2/updates/update-by-id', { updateId: oldTx.updateId, updateFormat: format() });
    expect(old.status).toBe(404);
    const info: Body = await fetch(`${sb.urls.ledgerApi}/sandbox/info`).then((x) => x.json());
    expect(info.migrationId).toBe(1);
    // New transactions continue after the imports, at the clock's record time.
    const cid = await tap('6');
    const next = await history(active.length);
    expect(next).toHaveLength(1);
    expect(next[0]).toMatchObject({ offset: active.length + 1, created: [cid] });
    expect(Date.parse((next[0] as Seen).recordTime)).toBeGreaterThan(Date.parse('2020-01-01T00:00:00Z'));
  });
});
