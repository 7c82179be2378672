/**
 * The Ledger API client against the sandbox participant: an external party
 * creates a transfer-preapproval proposal through prepare → sign → execute,
 * under V2 and V3, with Ed25519 and ECDSA P-256 keys; the update and the
 * contract are then visible through update-by-offset, active-contracts and
 * completions. Refusals carry Canton's codes: bad or missing signatures,
 * replays (deduplication), a transaction the participant never prepared,
 * max-record-time passed. Fault switches: 503 on an idempotent call is
 * retried, on execute it is not; a timeout after the commit leaves the
 * client with an ambiguous error while the transaction is on the ledger;
 * a tampered transaction's claimed hash is not the recomputed one.
 */
import { generateKeyPairSync, type KeyObject, randomUUID, sign } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oauth2ClientCredentials, staticBearer } from '../../src/canton/auth.js';
import { CantonApiError } from '../../src/canton/errors.js';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import { fingerprint } from '../../src/hashing/canton-hash.js';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { encodePreparedTransaction } from '../../src/hashing/encode.js';
import { bytesToBase64 } from '../../src/hashing/input.js';
import { hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import type { KeyScheme } from '../../src/keys/schemes.js';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';

interface TestParty {
  id: string;
  scheme: KeyScheme;
  key: KeyObject;
  fp: string;
}

let sb: RunningSandbox;
let client: LedgerApiClient;
let alice: TestParty;
let bob: TestParty;

function addParty(hint: string, scheme: KeyScheme): TestParty {
  const { publicKey, privateKey } =
    scheme === 'ed25519'
      ? generateKeyPairSync('ed25519')
      : generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const spki = new Uint8Array(publicKey.export({ type: 'spki', format: 'der' }));
  const fp = fingerprint(spki);
  const id = `${hint}::${fp}`;
  sb.ctx.net.parties.set(id, {
    partyId: id,
    namespace: fp,
    keys: [{ fingerprint: fp, scheme, spki }],
    threshold: 1,
    hosting: [{ participantUid: sb.ctx.net.participantUid, permission: 'confirmation' }],
    via: 'ledger-api',
  });
  sb.ctx.net.users.get(LEDGER_API_USER)!.actAs.add(id);
  return { id, scheme, key: privateKey, fp };
}

function signatureOf(p: TestParty, hash: Uint8Array) {
  const ed = p.scheme === 'ed25519';
  return {
    format: ed ? ('SIGNATURE_FORMAT_CONCAT' as const) : ('SIGNATURE_FORMAT_DER' as const),
    signature: bytesToBase64(ed ? sign(null, hash, p.key) : sign('sha256', hash, p.key)),
    signedBy: p.fp,
    signingAlgorithmSpec: ed
      ? ('SIGNING_ALGORITHM_SPEC_ED25519' as const)
      : ('SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256' as const),
  };
}

function proposal(p: TestParty, extra: Record<string, unknown> = {}) {
  return {
    userId: LEDGER_API_USER,
    commandId: randomUUID(),
    actAs: [p.id],
    synchronizerId: sb.ctx.net.synchronizerId,
    commands: [
      {
        CreateCommand: {
          templateId: '#splice-wallet:Splice.Wallet.TransferPreapproval:TransferPreapprovalProposal',
          createArguments: {
            receiver: p.id,
            provider: sb.ctx.net.validatorParty,
            expectedDso: sb.ctx.net.dso,
          },
        },
      },
    ],
    ...extra,
  };
}

async function rejection(p: Promise<unknown>): Promise<CantonApiError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e, 'expected the call to fail').toBeInstanceOf(CantonApiError);
  return e as CantonApiError;
}

beforeAll(async () => {
  sb = await startSandbox({ seed: 'ledger-api-test', timers: false });
  client = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, retry: { baseDelayMs: 5, maxDelayMs: 20 } });
  alice = addParty('alice', 'ed25519');
  bob = addParty('bob', 'ecdsa-p256');
});
afterAll(async () => sb?.close());

describe('prepare → sign → execute', () => {
  it.each([
    ['V2', 'ed25519'],
    ['V3', 'ed25519'],
    ['V2', 'ecdsa-p256'],
    ['V3', 'ecdsa-p256'],
  ] as const)('%s, %s: the claimed hash is the recomputed one; the contract lands', async (v, scheme) => {
    const p = scheme === 'ed25519' ? alice : bob;
    const prep = await client.prepare({
      ...proposal(p),
      hashingSchemeVersion: `HASHING_SCHEME_VERSION_${v}`,
    });
    expect(prep.hashingSchemeVersion).toBe(`HASHING_SCHEME_VERSION_${v}`);
    const hash = hashPreparedTransaction(prep.preparedTransaction, { scheme: v === 'V2' ? 'v2' : 'v3' });
    expect(bytesToBase64(hash)).toBe(prep.preparedTransactionHash);
    const end0 = (await client.ledgerEnd()).offset;
    const res = await client.executeAndWait({
      preparedTransaction: prep.preparedTransaction,
      partySignatures: { signatures: [{ party: p.id, signatures: [signatureOf(p, hash)] }] },
      hashingSchemeVersion: `HASHING_SCHEME_VERSION_${v}`,
      submissionId: randomUUID(),
      userId: LEDGER_API_USER,
      deduplicationPeriod: { Empty: {} },
    });
    expect(res.completionOffset).toBeGreaterThan(end0);
    const upd = await client.updateByOffset({
      offset: res.completionOffset,
      updateFormat: {
        includeTransactions: {
          eventFormat: { filtersByParty: { [p.id]: {} }, verbose: true },
          transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
        },
      },
    });
    const tx = (upd.update as { Transaction: { value: { updateId: string; events: unknown[] } } }).Transaction
      .value;
    expect(tx.updateId).toBe(res.updateId);
    const created = JSON.stringify(tx.events);
    expect(created).toContain('TransferPreapprovalProposal');
    expect(created).toContain(p.id);
    const acs = await client.activeContracts({
      activeAtOffset: (await client.ledgerEnd()).offset,
      eventFormat: { filtersByParty: { [p.id]: {} }, verbose: false },
    });
    // The validator's automation has accepted the proposal: the party now has its preapproval.
    expect(JSON.stringify(acs)).toMatch(/Splice\.AmuletRules:TransferPreapproval"/);
  });

  it('async execute: the completion says ok, with the update id', async () => {
    const prep = await client.prepare(proposal(alice));
    const hash = hashPreparedTransaction(prep.preparedTransaction, { scheme: 'v2' });
    const begin = (await client.ledgerEnd()).offset;
    const submissionId = randomUUID();
    await client.execute({
      preparedTransaction: prep.preparedTransaction,
      partySignatures: { signatures: [{ party: alice.id, signatures: [signatureOf(alice, hash)] }] },
      hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
      submissionId,
      userId: LEDGER_API_USER,
      deduplicationPeriod: { Empty: {} },
    });
    const items = await client.completions(
      { userId: LEDGER_API_USER, parties: [alice.id], beginExclusive: begin },
      { limit: 1, streamIdleTimeoutMs: 500 },
    );
    const text = JSON.stringify(items);
    expect(text).toContain(submissionId);
    expect(text).toMatch(/"updateId":"1220[0-9a-f]{64}"/);
  });
});

describe('refusals, with Canton codes', () => {
  async function prepared(p = alice) {
    const prep = await client.prepare(proposal(p));
    return { prep, hash: hashPreparedTransaction(prep.preparedTransaction, { scheme: 'v2' }) };
  }
  const exec = (
    preparedTransaction: string,
    signatures: ReturnType<typeof signatureOf>[],
    party = alice.id,
  ) =>
    client.executeAndWait({
      preparedTransaction,
      partySignatures: { signatures: [{ party, signatures }] },
      hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
      submissionId: randomUUID(),
      userId: LEDGER_API_USER,
      deduplicationPeriod: { Empty: {} },
    });

  it('a signature over another hash: FAILED_TO_EXECUTE_TRANSACTION (400), naming the hash to sign', async () => {
    const { prep, hash } = await prepared();
    const other = new Uint8Array(hash);
    other[0]! ^= 1;
    const e = await rejection(exec(prep.preparedTransaction, [signatureOf(alice, other)]));
    expect(e.status).toBe(400);
    expect(e.code).toBe('FAILED_TO_EXECUTE_TRANSACTION');
    expect(e.retryable).toBe(false);
    expect(e.detail).toContain('Received 0 valid signatures');
    expect(e.detail).toContain(Buffer.from(hash).toString('hex'));
  });

  it('signedBy of a key the party does not have, and an algorithm that does not fit the key: refused', async () => {
    const { prep, hash } = await prepared();
    const byBob = { ...signatureOf(alice, hash), signedBy: bob.fp };
    expect((await rejection(exec(prep.preparedTransaction, [byBob]))).detail).toContain(
      'not a registered key',
    );
    const wrongAlgo = {
      ...signatureOf(alice, hash),
      signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256' as const,
    };
    expect((await rejection(exec(prep.preparedTransaction, [wrongAlgo]))).detail).toContain(
      'KeyAlgoSpecsMismatch',
    );
  });

  it('signatures for a party that is not acting: refused', async () => {
    const { prep, hash } = await prepared();
    const e = await rejection(exec(prep.preparedTransaction, [signatureOf(bob, hash)], bob.id));
    expect(e.code).toBe('FAILED_TO_EXECUTE_TRANSACTION');
  });

  it('the same change id twice: DUPLICATE_COMMAND (409) naming the first submission', async () => {
    const { prep, hash } = await prepared();
    const first = await exec(prep.preparedTransaction, [signatureOf(alice, hash)]);
    const e = await rejection(exec(prep.preparedTransaction, [signatureOf(alice, hash)]));
    expect(e.status).toBe(409);
    expect(e.code).toBe('DUPLICATE_COMMAND');
    expect(e.cantonError?.context.completion_offset).toBe(String(first.completionOffset));
  });

  it("the same change id twice on async execute: 200 {}, then a DUPLICATE_COMMAND rejection completion in Canton's status shape", async () => {
    const { prep, hash } = await prepared();
    const begin = (await client.ledgerEnd()).offset;
    const req = (submissionId: string) => ({
      preparedTransaction: prep.preparedTransaction,
      partySignatures: { signatures: [{ party: alice.id, signatures: [signatureOf(alice, hash)] }] },
      hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2' as const,
      submissionId,
      userId: LEDGER_API_USER,
      deduplicationPeriod: { Empty: {} },
    });
    const first = randomUUID();
    const second = randomUUID();
    await client.execute(req(first));
    expect(await client.execute(req(second))).toEqual({});
    const items = await client.completions(
      { userId: LEDGER_API_USER, parties: [alice.id], beginExclusive: begin },
      { limit: 10, streamIdleTimeoutMs: 500 },
    );
    const completions = items.flatMap((i) => {
      const r = i.completionResponse;
      return r && 'Completion' in r ? [r.Completion.value] : [];
    });
    expect(completions.find((c) => c.submissionId === first)?.status?.code ?? 0).toBe(0);
    const dup = completions.find((c) => c.submissionId === second);
    expect(dup?.status?.code).toBe(6); // ALREADY_EXISTS
    expect(dup?.status?.message).toMatch(
      /^DUPLICATE_COMMAND\(10,[0-9a-f]{8}\): A command with the given command id/,
    );
    const info = dup?.status?.details?.[0];
    expect(info?.typeUrl).toBe('type.googleapis.com/google.rpc.ErrorInfo');
    const raw = Buffer.from(info!.value, 'base64').toString('latin1');
    expect(raw).toContain('DUPLICATE_COMMAND');
    expect(raw).toContain('completion_offset');
  });

  it('a transaction the participant did not prepare (re-encoded with another command id): model conformance', async () => {
    const { prep } = await prepared();
    const tx = decodePreparedTransaction(prep.preparedTransaction);
    const forged = structuredClone(tx);
    forged.metadata.submitterInfo.commandId = randomUUID(); // a change the participant never interpreted
    const bytes = encodePreparedTransaction(forged);
    const hash = hashPreparedTransaction(bytes, { scheme: 'v2' });
    const e = await rejection(exec(bytesToBase64(bytes), [signatureOf(alice, hash)]));
    expect(e.code).toBe('LOCAL_VERDICT_FAILED_MODEL_CONFORMANCE_CHECK');
  });

  it('bytes that are not a PreparedTransaction: INVALID_ARGUMENT (400)', async () => {
    const junk = bytesToBase64(new Uint8Array([0x0a, 0x05, 1, 2]));
    const e = await rejection(exec(junk, [signatureOf(alice, new Uint8Array(32))]));
    expect(e.status).toBe(400);
    expect(e.code).toBe('INVALID_ARGUMENT');
  });

  it('max record time passed before execute (V3 signs it): NOT_SEQUENCED_TIMEOUT, and nothing committed', async () => {
    const maxRecordTime = new Date(Date.now() + 60_000).toISOString();
    const prep = await client.prepare({
      ...proposal(alice, { maxRecordTime }),
      hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V3',
    });
    const hash = hashPreparedTransaction(prep.preparedTransaction, { scheme: 'v3' });
    sb.ctx.net.clock.advance(120_000);
    const end = (await client.ledgerEnd()).offset;
    const e = await rejection(
      client.executeAndWait({
        preparedTransaction: prep.preparedTransaction,
        partySignatures: { signatures: [{ party: alice.id, signatures: [signatureOf(alice, hash)] }] },
        hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V3',
        submissionId: randomUUID(),
        userId: LEDGER_API_USER,
        deduplicationPeriod: { Empty: {} },
      }),
    );
    expect(e.code).toBe('NOT_SEQUENCED_TIMEOUT');
    expect(e.cantonError?.definiteAnswer).toBe(true);
    expect(sb.ctx.net.store.updates(end)).toHaveLength(0);
  });
});

describe('fault switches', () => {
  it('503 once on prepare (idempotent): the client retries and succeeds', async () => {
    sb.ctx.faults.inject({
      fault: { kind: 'status', status: 503, retryAfterMs: 1000 },
      operation: 'ledger-api.prepare',
      times: 1,
    });
    const before = sb.ctx.faults.applied().length;
    const fast = new LedgerApiClient({
      baseUrl: sb.urls.ledgerApi,
      retry: { baseDelayMs: 1, maxDelayMs: 5 },
    });
    const prep = await fast.prepare(proposal(alice));
    expect(prep.preparedTransaction.length).toBeGreaterThan(0);
    expect(
      sb.ctx.faults
        .applied()
        .slice(before)
        .map((a) => a.kind),
    ).toEqual(['status']);
  });

  it('503 on executeAndWait (not idempotent): no retry; retryable, with the retry delay', async () => {
    const prep = await client.prepare(proposal(alice));
    const hash = hashPreparedTransaction(prep.preparedTransaction, { scheme: 'v2' });
    sb.ctx.faults.inject({
      fault: { kind: 'status', status: 503, retryAfterMs: 2000 },
      operation: 'ledger-api.executeAndWait',
      times: 2,
    });
    const e = await rejection(
      client.executeAndWait({
        preparedTransaction: prep.preparedTransaction,
        partySignatures: { signatures: [{ party: alice.id, signatures: [signatureOf(alice, hash)] }] },
        hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
        submissionId: randomUUID(),
        userId: LEDGER_API_USER,
        deduplicationPeriod: { Empty: {} },
      }),
    );
    expect(e.status).toBe(503);
    expect(e.code).toBe('SERVICE_NOT_RUNNING');
    expect(e.retryable).toBe(true);
    expect(e.retryAfterMs).toBe(2000);
    expect(sb.ctx.faults.list().find((f) => f.operation === 'ledger-api.executeAndWait')?.remaining).toBe(1);
    sb.ctx.faults.clear();
  });

  it('timeout after the commit: the client sees an ambiguous timeout, the ledger has the transaction', async () => {
    const prep = await client.prepare(proposal(alice));
    const hash = hashPreparedTransaction(prep.preparedTransaction, { scheme: 'v2' });
    sb.ctx.faults.inject({
      fault: { kind: 'timeoutAfterCommit', ms: 2000 },
      operation: 'ledger-api.executeAndWait',
      times: 1,
    });
    const end = (await client.ledgerEnd()).offset;
    const e = await rejection(
      client.executeAndWait(
        {
          preparedTransaction: prep.preparedTransaction,
          partySignatures: { signatures: [{ party: alice.id, signatures: [signatureOf(alice, hash)] }] },
          hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
          submissionId: randomUUID(),
          userId: LEDGER_API_USER,
          deduplicationPeriod: { Empty: {} },
        },
        { timeoutMs: 300 },
      ),
    );
    expect(e.code).toBe('TIMEOUT');
    expect(e.ambiguous).toBe(true);
    expect((await client.ledgerEnd()).offset).toBeGreaterThan(end);
  });

  it('tampered prepare with the original hash: the claimed hash is not the recomputed one, and mallory is in it', async () => {
    sb.ctx.faults.inject({
      fault: { kind: 'tamper', change: 'receiver', hash: 'original' },
      operation: 'ledger-api.prepare',
      times: 1,
    });
    const prep = await client.prepare(proposal(alice));
    const hash = hashPreparedTransaction(prep.preparedTransaction, { scheme: 'v2' });
    expect(bytesToBase64(hash)).not.toBe(prep.preparedTransactionHash);
    expect(
      JSON.stringify(decodePreparedTransaction(prep.preparedTransaction), (_k, v) =>
        typeof v === 'bigint' ? String(v) : v,
      ),
    ).toContain(sb.ctx.net.mallory);
  });
});

describe('authentication', () => {
  it('OAuth2 client credentials: token fetched once, refreshed after it expires; no token → UNAUTHENTICATED', async () => {
    const secured = await startSandbox({
      seed: 'auth-test',
      timers: false,
      auth: {
        required: true,
        clients: { signer: { secret: 's3cret', userId: LEDGER_API_USER } },
        tokens: { fixed: LEDGER_API_USER },
      },
    });
    try {
      const anon = new LedgerApiClient({ baseUrl: secured.urls.ledgerApi, retry: { attempts: 1 } });
      const e = await rejection(anon.ledgerEnd());
      expect(e.status).toBe(401);
      expect(e.code).toBe('UNAUTHENTICATED');
      const c = new LedgerApiClient({
        baseUrl: secured.urls.ledgerApi,
        auth: oauth2ClientCredentials({
          tokenUrl: secured.urls.oauthToken,
          clientId: 'signer',
          clientSecret: 's3cret',
        }),
      });
      await c.ledgerEnd();
      await c.participantId();
      expect(secured.ctx.auth.tokensIssued).toBe(1);
      secured.ctx.auth.expireAll();
      await c.ledgerEnd();
      expect(secured.ctx.auth.tokensIssued).toBe(2);
      const fixed = new LedgerApiClient({ baseUrl: secured.urls.ledgerApi, auth: staticBearer('fixed') });
      expect((await fixed.participantId()).participantId).toBe(secured.ctx.net.participantId);
      const bad = new LedgerApiClient({
        baseUrl: secured.urls.ledgerApi,
        auth: oauth2ClientCredentials({
          tokenUrl: secured.urls.oauthToken,
          clientId: 'signer',
          clientSecret: 'wrong',
        }),
      });
      const be = await rejection(bad.ledgerEnd());
      expect(be.service).toBe('oauth');
      expect(be.message).not.toContain('wrong');
    } finally {
      await secured.close();
    }
  });
});
