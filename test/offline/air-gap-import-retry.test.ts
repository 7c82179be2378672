/**
 * An import whose onboarding fails for a reason that is not the response's
 * (here: the service's Ledger API user lacks participant_admin) leaves the
 * export open: the same response imported again, once the cause is fixed,
 * onboards the party. A response that is itself bad stays refused, and a
 * response imported successfully is accepted once (`nonce_replayed`). A run
 * that fails after it took the imported signature, other than by a refusal
 * of the service's credentials, may have reached the ledger: the import is
 * kept, and `continue` carries it on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import { listAudit } from '../../src/store/audit.js';
import { type AirGapEnv, airGapEnv } from '../support/air-gap-env.js';

let ag: AirGapEnv;

beforeAll(async () => {
  ag = await airGapEnv({ seed: 'air-gap-import-retry' });
}, 60_000);

afterAll(async () => {
  await ag?.close();
});

/** A cold key onboarded through the service by the air gap: the export made, signed offline; not imported. */
async function onboardingResponse(hint: string) {
  const key = await ag.cold.generate({ label: hint, scheme: 'ed25519', backend: 'file' });
  await ag.env.flow.signer.importPublicKey(`${hint}-pub`, 'ed25519', key.publicKeySpki);
  const admin = await ag.env.auth(['admin']);
  const first = await ag.inject('POST', '/v1/parties', admin, {
    hint,
    keyLabel: `${hint}-pub`,
    path: 'ledger-api',
  });
  expect(first.status, JSON.stringify(first.body)).toBe(202);
  const exportId = String(first.body.exportId);
  const got = await ag.inject('GET', `/v1/air-gap/exports/${exportId}`, ag.operator);
  const response = await ag.signOffline(got.body.envelope);
  return { key, exportId, response, party: (got.body.export as { party: string }).party };
}

describe('importing an onboarding response', () => {
  it('a run that fails upstream releases the import: the same response onboards on the next try', async () => {
    const user = ag.env.flow.net.users.get(LEDGER_API_USER)!;
    user.admin = true;
    const { key, exportId, response, party } = await onboardingResponse('retry');

    // A response that is itself bad: refused, and it uses nothing up.
    const tampered = structuredClone(response);
    const sig = Buffer.from(tampered.signatures[0]!.signature, 'base64');
    sig[sig.length - 1]! ^= 1;
    tampered.signatures[0]!.signature = sig.toString('base64');
    const bad = await ag.inject('POST', '/v1/air-gap/imports', ag.operator, tampered);
    expect(bad.status).toBe(422);
    expect(bad.body.code).toBe('signature_invalid');

    // The participant refuses the allocation: not the response's fault.
    user.admin = false;
    const failed = await ag.inject('POST', '/v1/air-gap/imports', ag.operator, response);
    expect(failed.status, JSON.stringify(failed.body)).not.toBe(200);
    expect(JSON.stringify(failed.body)).toContain('participant_admin');
    expect((await ag.env.store.airGap.get(exportId))?.status).toBe('open');
    expect(await ag.env.store.parties.get(party)).toBeUndefined();
    const released = (await listAudit(ag.env.store.db, { limit: 1000 })).filter(
      (r) => r.action === 'air-gap.import-released',
    );
    expect(released.map((r) => r.details)).toEqual([
      expect.objectContaining({ export: exportId, message: expect.stringContaining('participant_admin') }),
    ]);

    // Fixed: the same response is imported and onboards the party.
    user.admin = true;
    const ok = await ag.inject('POST', '/v1/air-gap/imports', ag.operator, response);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.onboarded).toEqual({ partyId: party, status: 'new' });
    expect((await ag.env.store.airGap.get(exportId))?.status).toBe('done');
    expect((await ag.env.store.parties.get(party))?.fingerprint).toBe(key.fingerprint);

    // Accepted once.
    const again = await ag.inject('POST', '/v1/air-gap/imports', ag.operator, response);
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('nonce_replayed');
  });

  it('a run that fails after the signature was sent (a 503) keeps the import: continue carries it on', async () => {
    const user = ag.env.flow.net.users.get(LEDGER_API_USER)!;
    user.admin = true;
    const { exportId, response, party } = await onboardingResponse('lost');

    // The signed allocation meets a participant that answers 503: as far as the service can
    // tell, what it sent may still be acted on.
    const fault = ag.env.flow.sb.ctx.faults.inject({
      fault: { kind: 'status', status: 503 },
      operation: 'ledger-api.allocateExternalParty',
      times: 1,
    });
    const failed = await ag.inject('POST', '/v1/air-gap/imports', ag.operator, response);
    ag.env.flow.sb.ctx.faults.remove(fault);
    expect(failed.status, JSON.stringify(failed.body)).not.toBe(200);
    expect((await ag.env.store.airGap.get(exportId))?.status).toBe('imported');
    const released = (
      await listAudit(ag.env.store.db, { subject: `air-gap:${exportId}`, limit: 1000 })
    ).filter((r) => r.action === 'air-gap.import-released');
    expect(released).toEqual([]);
    const replay = await ag.inject('POST', '/v1/air-gap/imports', ag.operator, response);
    expect(replay.status).toBe(409);

    const carried = await ag.inject('POST', `/v1/air-gap/exports/${exportId}/continue`, ag.operator);
    expect(carried.status, JSON.stringify(carried.body)).toBe(200);
    expect(carried.body.onboarded).toMatchObject({ partyId: party });
    expect((await ag.env.store.airGap.get(exportId))?.status).toBe('done');
  });
});
