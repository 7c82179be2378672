/**
 * The other repositories on both drivers: key metadata (public facts only),
 * DbPartyBook (the PartyBook interface the flows use), DbRecorder (journal
 * records as audit entries) and the evidence tables (prepared transactions,
 * signatures, submissions) written together with a withdrawal transition.
 */
import { generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listAudit, verifyAudit } from '../../src/store/audit.js';
import type { Db } from '../../src/store/db.js';
import { NotFoundError } from '../../src/store/errors.js';
import { type Store, storeOn } from '../../src/store/index.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { DbPartyBook } from '../../src/store/repos/parties.js';
import { storeDrivers } from '../support/pg.js';

const drivers = await storeDrivers();

const spki = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'der' });
const FP = `1220${'ab'.repeat(32)}`;

describe.each(drivers)('repositories on $name', (driver) => {
  let db: Db;
  let store: Store;
  beforeAll(async () => {
    db = await driver.fresh();
    store = storeOn(db, 'admin-1');
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  it('KeyRepo keeps public metadata only, from a KeyDescription-like object', async () => {
    const description = {
      label: 'hot-1',
      backend: 'file' as const,
      scheme: 'ed25519' as const,
      fingerprint: FP,
      publicKeySpki: new Uint8Array(spki),
      createdAt: '2025-01-02T03:04:05.678Z',
      disabled: false,
      // fields a caller might carry along must not reach the database
      privateKeyPkcs8: 'SECRET-MATERIAL',
      passphrase: 'SECRET-PASSPHRASE',
    };
    const k = await store.keys.put(description);
    expect(k).toEqual({
      label: 'hot-1',
      backend: 'file',
      scheme: 'ed25519',
      fingerprint: FP,
      publicKeySpki: spki.toString('base64'),
      createdAt: '2025-01-02T03:04:05.678Z',
      disabled: false,
    });
    expect(await store.keys.get('hot-1')).toEqual(k);
    expect(await store.keys.byFingerprint(FP)).toEqual([k]);
    const dump = JSON.stringify(
      (await db.query('SELECT * FROM keys')).rows.concat((await db.query('SELECT * FROM audit_log')).rows),
    );
    expect(dump).not.toContain('SECRET');
    const off = await store.keys.setDisabled('hot-1', true, 'admin-2');
    expect(off.disabled).toBe(true);
    expect((await store.keys.list()).map((x) => [x.label, x.disabled])).toEqual([['hot-1', true]]);
    await expect(store.keys.setDisabled('nope', true)).rejects.toBeInstanceOf(NotFoundError);
    const trail = await listAudit(db, { subject: 'key:hot-1' });
    expect(trail.map((a) => [a.actor, a.action])).toEqual([
      ['admin-1', 'key.put'],
      ['admin-2', 'key.disable'],
    ]);
    await expect(store.keys.put({ ...description, label: 'bad label!' })).rejects.toThrow();
    await expect(store.keys.put({ ...description, label: 'x', fingerprint: 'zz' })).rejects.toThrow();
  });

  it('DbPartyBook round-trips PartyRecords and replaces on put', async () => {
    const p: PartyRecord = {
      partyId: `alice::${FP}`,
      hint: 'alice',
      keyLabel: 'hot-1',
      scheme: 'ed25519',
      fingerprint: FP,
      publicKeySpki: spki.toString('base64'),
      via: 'validator',
      participantUid: 'PAR::participant1::1220cd',
      createdAt: '2025-01-02T03:04:05.000Z',
    };
    expect(await store.parties.get(p.partyId)).toBeUndefined();
    await store.parties.put(p);
    expect(await store.parties.get(p.partyId)).toEqual(p);
    const q: PartyRecord = {
      ...p,
      partyId: `bob::${FP}`,
      hint: 'bob',
      via: 'ledger-api',
      synchronizerId: 'global::1220ef',
      ansName: 'bob.unverified.ans',
      createdAt: '2025-01-03T00:00:00.000Z',
    };
    delete q.participantUid;
    await store.parties.put(q);
    await store.parties.put({ ...p, ansName: 'alice.ans' });
    expect(await store.parties.list()).toEqual([{ ...p, ansName: 'alice.ans' }, q]);
    expect((await listAudit(db, { subject: `party:${p.partyId}` })).map((a) => a.action)).toEqual([
      'party.put',
      'party.put',
    ]);
  });

  it('DbPartyBook caches records per database handle; a put through any book refreshes them', async () => {
    const p: PartyRecord = {
      partyId: `carol::${FP}`,
      hint: 'carol',
      keyLabel: 'carol-1',
      scheme: 'ed25519',
      fingerprint: FP,
      publicKeySpki: spki.toString('base64'),
      via: 'ledger-api',
      createdAt: '2025-01-04T00:00:00.000Z',
    };
    const writer = new DbPartyBook(db, { actor: 'admin-2' });
    await writer.put(p);
    expect(await store.parties.get(p.partyId)).toEqual(p);
    // Behind the cache's back (another instance, say): the cached record is still answered…
    await db.query('UPDATE parties SET key_label = $1 WHERE party_id = $2', ['carol-2', p.partyId]);
    expect((await store.parties.get(p.partyId))?.keyLabel).toBe('carol-1');
    // …by an uncached book the change is seen at once, and a put through any book refreshes the cache.
    expect((await new DbPartyBook(db, { cacheMs: 0 }).get(p.partyId))?.keyLabel).toBe('carol-2');
    await writer.put({ ...p, keyLabel: 'carol-3' });
    expect((await store.parties.get(p.partyId))?.keyLabel).toBe('carol-3');
    // A caller changing the answer does not change the cache.
    const got = await store.parties.get(p.partyId);
    got!.keyLabel = 'mutated';
    expect((await store.parties.get(p.partyId))?.keyLabel).toBe('carol-3');
  });

  it('DbRecorder writes each journal record into the audit chain and reads it back', async () => {
    const rec = store.recorder.with({ actor: 'worker-1', subject: 'withdrawal:w-1' });
    await rec.record({
      flow: 'transfer',
      step: 'refused',
      partyId: 'alice::1',
      reason: 'intent_mismatch',
      message: 'amount differs',
    });
    await rec.record({
      flow: 'transfer',
      step: 'signed',
      partyId: 'alice::1',
      hash: 'cd'.repeat(32),
      signedBy: FP,
      attempt: 1,
      commandId: 'cs-wd-1',
    });
    await store.recorder.record({
      flow: 'offers',
      step: 'committed',
      partyId: 'bob::2',
      commandId: 'cmd-9',
      updateId: 'u-9',
      facts: { cid: '00ab' },
    });
    const back = await rec.records('withdrawal:w-1');
    expect(back.map((r) => r.step)).toEqual(['refused', 'signed']);
    expect(back[1]).toMatchObject({ flow: 'transfer', hash: 'cd'.repeat(32), signedBy: FP, attempt: 1 });
    expect(back[0]!.at).toMatch(/Z$/);
    const other = await listAudit(db, { subject: 'command:cmd-9' });
    expect(other).toHaveLength(1);
    expect(other[0]).toMatchObject({
      actor: 'admin-1',
      action: 'flow.committed',
      details: { updateId: 'u-9', facts: { cid: '00ab' } },
    });
    const signed = (await listAudit(db, { subject: 'withdrawal:w-1' }))[1]!;
    expect(signed).toMatchObject({ actor: 'worker-1', action: 'flow.signed' });
    expect((await verifyAudit(db)).ok).toBe(true);
  });

  it('evidence rows are written in the same transaction as the withdrawal transition', async () => {
    const { withdrawal: w } = await store.withdrawals.create({
      idempotencyKey: 'ev-1',
      caller: 'bot',
      body: { party: 'alice::1', receiver: 'bob::2', amount: '1' },
    });
    const hash = 'ef'.repeat(32);
    let preparedId = '';
    await store.withdrawals.transition(
      w.id,
      ['received'],
      'prepared',
      { incrementAttempts: true },
      {
        also: async (tx, cur) => {
          preparedId = (
            await store.artifacts.recordPrepared(
              { withdrawalId: cur.id, attempt: cur.attempts, hash, hashingScheme: 'v2', bytes: 'AAEC' },
              tx,
            )
          ).id;
        },
      },
    );
    await store.withdrawals.transition(
      w.id,
      ['prepared'],
      'signed',
      {},
      {
        details: { hash },
        also: async (tx) => {
          await store.artifacts.recordSignature(
            {
              preparedId,
              withdrawalId: w.id,
              hash,
              signedBy: FP,
              keyLabel: 'hot-1',
              scheme: 'ed25519',
              signatureFormat: 'SIGNATURE_FORMAT_CONCAT',
              signature: 'c2ln',
            },
            tx,
          );
        },
      },
    );
    await store.withdrawals.transition(
      w.id,
      ['signed'],
      'submitted',
      {},
      {
        also: async (tx) => {
          await store.artifacts.recordSubmission(
            {
              submissionId: 'sub-1',
              commandId: w.commandId,
              withdrawalId: w.id,
              preparedId,
              ledgerEndBefore: 41,
            },
            tx,
          );
        },
      },
    );
    const sub = await store.artifacts.setSubmissionOutcome('sub-1', {
      outcome: 'committed',
      completionOffset: 57,
      updateId: 'upd-1',
    });
    expect(sub).toMatchObject({
      outcome: 'committed',
      ledgerEndBefore: 41,
      completionOffset: 57,
      updateId: 'upd-1',
      commandId: w.commandId,
    });
    expect(await store.artifacts.preparedFor(w.id)).toEqual([
      expect.objectContaining({
        id: preparedId,
        withdrawalId: w.id,
        attempt: 1,
        hash,
        hashingScheme: 'v2',
        bytes: 'AAEC',
      }),
    ]);
    expect((await store.artifacts.signaturesFor(w.id))[0]).toMatchObject({
      preparedId,
      signedBy: FP,
      signature: 'c2ln',
    });
    expect(await store.artifacts.submissionsFor(w.commandId)).toEqual([sub]);
    await expect(
      store.artifacts.setSubmissionOutcome('nope', { outcome: 'rejected' }),
    ).rejects.toBeInstanceOf(NotFoundError);

    // a failing evidence insert rolls the transition back
    await expect(
      store.withdrawals.transition(
        w.id,
        ['submitted'],
        'committed',
        {},
        {
          also: async (tx) => {
            await store.artifacts.recordSubmission({ submissionId: 'sub-1', commandId: w.commandId }, tx);
          },
        },
      ),
    ).rejects.toThrow();
    expect((await store.withdrawals.get(w.id))!.state).toBe('submitted');
    expect((await verifyAudit(db)).ok).toBe(true);
  });
});
