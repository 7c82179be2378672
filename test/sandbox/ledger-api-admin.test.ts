/**
 * The rest of the Ledger API client against the sandbox participant, over
 * HTTP: external-party onboarding (generate-topology → sign the multiHash or
 * each transaction → allocate) with Ed25519 (RAW and SPKI) and ECDSA P-256
 * keys, then a submission by the new party; user rights (list, grant, revoke);
 * connected synchronizers and the participant id; execute-and-wait-for-
 * transaction; the refusals of classic command submission and reassignment;
 * the client's own error paths (request validation before sending, retries of
 * idempotent reads after a latency or a lost response, an ambiguous lost
 * execute, a 429 that is not retried). Raw response bodies are checked against
 * the published Ledger API 3.5.1 OpenAPI document.
 */
import { generateKeyPairSync, type KeyObject, randomUUID, sign } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { staticBearer } from '../../src/canton/auth.js';
import { CantonApiError } from '../../src/canton/errors.js';
import { LedgerApiClient, LedgerApiRequestError } from '../../src/canton/ledger-api/client.js';
import { topologyTransactionHash } from '../../src/hashing/canton-hash.js';
import { bytesToBase64 } from '../../src/hashing/input.js';
import { hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import { LEDGER_API_USER, VALIDATOR_USER } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { loadSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';

const spec = loadSpec(join(SPECS_DIR, 'canton-ledger-api/openapi-3.5.1.yaml'));

type Scheme = 'ed25519' | 'ed25519-spki' | 'ecdsa-p256';

interface TestKey {
  scheme: Scheme;
  privateKey: KeyObject;
  publicKey: {
    format: 'CRYPTO_KEY_FORMAT_RAW' | 'CRYPTO_KEY_FORMAT_DER_X509_SUBJECT_PUBLIC_KEY_INFO';
    keyData: string;
    keySpec: 'SIGNING_KEY_SPEC_EC_CURVE25519' | 'SIGNING_KEY_SPEC_EC_P256';
  };
}

interface Party {
  id: string;
  fp: string;
  key: TestKey;
}

function newKey(scheme: Scheme): TestKey {
  const ed = scheme !== 'ecdsa-p256';
  const pair = ed ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const spki = pair.publicKey.export({ type: 'spki', format: 'der' });
  return {
    scheme,
    privateKey: pair.privateKey,
    publicKey: {
      format:
        scheme === 'ed25519' ? 'CRYPTO_KEY_FORMAT_RAW' : 'CRYPTO_KEY_FORMAT_DER_X509_SUBJECT_PUBLIC_KEY_INFO',
      keyData: (scheme === 'ed25519' ? spki.subarray(spki.length - 32) : spki).toString('base64'),
      keySpec: ed ? 'SIGNING_KEY_SPEC_EC_CURVE25519' : 'SIGNING_KEY_SPEC_EC_P256',
    },
  };
}

/** A Ledger API `Signature` by `k` over `message`. */
function sig(k: TestKey, signedBy: string, message: Uint8Array) {
  const ed = k.scheme !== 'ecdsa-p256';
  return {
    format: ed ? ('SIGNATURE_FORMAT_CONCAT' as const) : ('SIGNATURE_FORMAT_DER' as const),
    signature: bytesToBase64(ed ? sign(null, message, k.privateKey) : sign('sha256', message, k.privateKey)),
    signedBy,
    signingAlgorithmSpec: ed
      ? ('SIGNING_ALGORITHM_SPEC_ED25519' as const)
      : ('SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256' as const),
  };
}

/** A fetch that counts requests and keeps the last raw response body (for OpenAPI checks). */
function recordingFetch() {
  const rec = {
    calls: 0,
    lastBody: undefined as unknown,
    fetch: (async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
      rec.calls++;
      const res = await fetch(input, init);
      const text = await res.clone().text();
      try {
        rec.lastBody = JSON.parse(text);
      } catch {
        rec.lastBody = text;
      }
      return res;
    }) as typeof fetch,
  };
  return rec;
}

let sb: RunningSandbox;
/** Acts as the validator operator (participant admin). */
let admin: LedgerApiClient;
let adminRec: ReturnType<typeof recordingFetch>;
/** No token: the default user (`sandbox-user`, not an admin). */
let plain: LedgerApiClient;
let plainRec: ReturnType<typeof recordingFetch>;
/** Token of the default user. */
let userToken: LedgerApiClient;
let carol: Party;

const retry = { baseDelayMs: 1, maxDelayMs: 5 };

async function rejection(p: Promise<unknown>): Promise<CantonApiError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e, 'expected the call to fail').toBeInstanceOf(CantonApiError);
  return e as CantonApiError;
}

async function generate(k: TestKey, hint: string) {
  return admin.generateExternalPartyTopology({
    synchronizer: sb.ctx.net.synchronizerId,
    partyHint: hint,
    publicKey: k.publicKey,
  });
}

/** Onboards a party over HTTP, signing the multiHash; its actAs goes to `userId`. */
async function onboard(k: TestKey, hint: string, userId = LEDGER_API_USER): Promise<Party> {
  const gen = await generate(k, hint);
  const res = await admin.allocateExternalParty({
    synchronizer: sb.ctx.net.synchronizerId,
    onboardingTransactions: gen.topologyTransactions.map((transaction) => ({ transaction })),
    multiHashSignatures: [sig(k, gen.publicKeyFingerprint, Buffer.from(gen.multiHash, 'base64'))],
    userId,
  });
  expect(res.partyId).toBe(gen.partyId);
  return { id: res.partyId, fp: gen.publicKeyFingerprint, key: k };
}

function proposal(p: Party) {
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
  };
}

/** Prepares a proposal create for `p` and returns the execute request, signed. */
async function signedExecute(p: Party) {
  const prep = await plain.prepare(proposal(p));
  const hash = hashPreparedTransaction(prep.preparedTransaction, { scheme: 'v2' });
  return {
    prep,
    req: {
      preparedTransaction: prep.preparedTransaction,
      partySignatures: { signatures: [{ party: p.id, signatures: [sig(p.key, p.fp, hash)] }] },
      hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2' as const,
      submissionId: randomUUID(),
      userId: LEDGER_API_USER,
      deduplicationPeriod: { Empty: {} },
    },
  };
}

beforeAll(async () => {
  sb = await startSandbox({
    seed: 'ledger-api-admin-test',
    timers: false,
    auth: { tokens: { admin: VALIDATOR_USER, plain: LEDGER_API_USER } },
  });
  adminRec = recordingFetch();
  plainRec = recordingFetch();
  admin = new LedgerApiClient({
    baseUrl: sb.urls.ledgerApi,
    auth: staticBearer('admin'),
    retry,
    fetch: adminRec.fetch,
  });
  plain = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, retry, fetch: plainRec.fetch });
  userToken = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, auth: staticBearer('plain'), retry });
  carol = await onboard(newKey('ed25519'), 'carol');
});
afterAll(async () => sb?.close());

describe('external-party onboarding over HTTP', () => {
  it.each(['ed25519', 'ed25519-spki', 'ecdsa-p256'] as const)(
    '%s: generate → sign the multiHash → allocate; the party then submits with that key',
    async (scheme) => {
      const k = newKey(scheme);
      const gen = await generate(k, `p-${scheme}`);
      expect(validateAgainst(spec, 'GenerateExternalPartyTopologyResponse', adminRec.lastBody)).toEqual([]);
      expect(gen.partyId).toBe(`p-${scheme}::${gen.publicKeyFingerprint}`);
      const res = await admin.allocateExternalParty({
        synchronizer: sb.ctx.net.synchronizerId,
        onboardingTransactions: gen.topologyTransactions.map((transaction) => ({ transaction })),
        multiHashSignatures: [sig(k, gen.publicKeyFingerprint, Buffer.from(gen.multiHash, 'base64'))],
        userId: LEDGER_API_USER,
      });
      expect(validateAgainst(spec, 'AllocateExternalPartyResponse', adminRec.lastBody)).toEqual([]);
      expect(res.partyId).toBe(gen.partyId);
      expect(sb.ctx.net.parties.get(res.partyId)?.keys.map((x) => x.fingerprint)).toEqual([
        gen.publicKeyFingerprint,
      ]);

      const p: Party = { id: res.partyId, fp: gen.publicKeyFingerprint, key: k };
      const { prep, req } = await signedExecute(p);
      expect(validateAgainst(spec, 'JsPrepareSubmissionResponse', plainRec.lastBody)).toEqual([]);
      const done = await plain.executeAndWait(req);
      expect(done.updateId).toMatch(/^1220[0-9a-f]{64}$/);
      const update = sb.ctx.net.store.updateById(done.updateId)!;
      const creates = update.events.filter((e) => e.kind === 'created').map((e) => e.contract);
      expect(creates.map((c) => c.templateId)).toEqual([
        expect.objectContaining({
          moduleName: 'Splice.Wallet.TransferPreapproval',
          entityName: 'TransferPreapprovalProposal',
        }),
      ]);
      expect(JSON.stringify(creates, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).toContain(p.id);
      expect(prep.hashingSchemeVersion).toBe('HASHING_SCHEME_VERSION_V2');
    },
  );

  it('per-transaction signatures instead of a multiHash signature', async () => {
    const k = newKey('ecdsa-p256');
    const gen = await generate(k, 'per-tx');
    const res = await admin.allocateExternalParty({
      synchronizer: sb.ctx.net.synchronizerId,
      onboardingTransactions: gen.topologyTransactions.map((transaction) => ({
        transaction,
        signatures: [sig(k, gen.publicKeyFingerprint, topologyTransactionHash(transaction))],
      })),
    });
    expect(res.partyId).toBe(gen.partyId);
    expect(sb.ctx.net.parties.has(gen.partyId)).toBe(true);
  });

  it('allocating the same party again: PARTY_ALREADY_EXISTS (409)', async () => {
    const k = newKey('ed25519');
    const gen = await generate(k, 'twice');
    const body = {
      synchronizer: sb.ctx.net.synchronizerId,
      onboardingTransactions: gen.topologyTransactions.map((transaction) => ({ transaction })),
      multiHashSignatures: [sig(k, gen.publicKeyFingerprint, Buffer.from(gen.multiHash, 'base64'))],
    };
    await admin.allocateExternalParty(body);
    const e = await rejection(admin.allocateExternalParty(body));
    expect(e.status).toBe(409);
    expect(e.code).toBe('PARTY_ALREADY_EXISTS');
    expect(e.cantonError?.resources).toContainEqual(['PARTY', gen.partyId]);
    expect(validateAgainst(spec, 'JsCantonError', adminRec.lastBody)).toEqual([]);
  });

  it('allocate for an unknown userId: USER_NOT_FOUND (404) and nothing allocated; the same request without it then succeeds', async () => {
    const k = newKey('ed25519');
    const gen = await generate(k, 'nouser');
    const body = {
      synchronizer: sb.ctx.net.synchronizerId,
      onboardingTransactions: gen.topologyTransactions.map((transaction) => ({ transaction })),
      multiHashSignatures: [sig(k, gen.publicKeyFingerprint, Buffer.from(gen.multiHash, 'base64'))],
    };
    const e = await rejection(admin.allocateExternalParty({ ...body, userId: 'no-such-user' }));
    expect(e.status).toBe(404);
    expect(e.code).toBe('USER_NOT_FOUND');
    expect(sb.ctx.net.parties.has(gen.partyId)).toBe(false);
    expect((await admin.allocateExternalParty(body)).partyId).toBe(gen.partyId);
  });

  it('a signature by another key under the party fingerprint: TOPOLOGY_INVALID_TOPOLOGY_TX_SIGNATURE (400)', async () => {
    const k = newKey('ed25519');
    const gen = await generate(k, 'forged');
    const e = await rejection(
      admin.allocateExternalParty({
        synchronizer: sb.ctx.net.synchronizerId,
        onboardingTransactions: gen.topologyTransactions.map((transaction) => ({ transaction })),
        multiHashSignatures: [
          sig(newKey('ed25519'), gen.publicKeyFingerprint, Buffer.from(gen.multiHash, 'base64')),
        ],
      }),
    );
    expect(e.status).toBe(400);
    expect(e.code).toBe('TOPOLOGY_INVALID_TOPOLOGY_TX_SIGNATURE');
    expect(e.retryable).toBe(false);
    expect(e.detail).toMatch(/does not verify/);
    expect(sb.ctx.net.parties.has(gen.partyId)).toBe(false);
  });

  it('allocate by a user without participant_admin: PERMISSION_DENIED (403), nothing allocated', async () => {
    const k = newKey('ed25519');
    const gen = await generate(k, 'nonadmin');
    const body = {
      synchronizer: sb.ctx.net.synchronizerId,
      onboardingTransactions: gen.topologyTransactions.map((transaction) => ({ transaction })),
      multiHashSignatures: [sig(k, gen.publicKeyFingerprint, Buffer.from(gen.multiHash, 'base64'))],
    };
    for (const c of [userToken, plain]) {
      const e = await rejection(c.allocateExternalParty(body));
      expect(e.status).toBe(403);
      expect(e.code).toBe('PERMISSION_DENIED');
    }
    expect(sb.ctx.net.parties.has(gen.partyId)).toBe(false);
  });
});

describe('authenticated user', () => {
  it("GET /v2/authenticated-user names the token's user, or the default user without a token", async () => {
    const a = await admin.authenticatedUser();
    expect(validateAgainst(spec, 'GetUserResponse', adminRec.lastBody)).toEqual([]);
    expect(a.user.id).toBe(VALIDATOR_USER);
    expect((await userToken.authenticatedUser()).user.id).toBe(LEDGER_API_USER);
    expect((await plain.authenticatedUser()).user.id).toBe(LEDGER_API_USER);
    expect(validateAgainst(spec, 'GetUserResponse', plainRec.lastBody)).toEqual([]);
  });
});

describe('user rights', () => {
  it('allocate with userId gives that user actAs; list shows it; the admin has ParticipantAdmin', async () => {
    const r = await admin.listUserRights(LEDGER_API_USER);
    expect(validateAgainst(spec, 'ListUserRightsResponse', adminRec.lastBody)).toEqual([]);
    expect(r.rights).toContainEqual({ kind: { CanActAs: { value: { party: carol.id } } } });
    const own = await admin.listUserRights(VALIDATOR_USER);
    expect(own.rights).toContainEqual({ kind: { ParticipantAdmin: { value: {} } } });
    expect(own.rights).toContainEqual({
      kind: { CanActAs: { value: { party: sb.ctx.net.validatorParty } } },
    });
  });

  it('grant CanReadAs / CanExecuteAs / CanActAs, again (no-op), then revoke', async () => {
    const p = sb.ctx.net.validatorParty;
    const rights = [
      { kind: { CanReadAs: { value: { party: carol.id } } } },
      { kind: { CanExecuteAs: { value: { party: carol.id } } } },
      { kind: { CanActAs: { value: { party: p } } } },
    ];
    const g = await admin.grantUserRights(LEDGER_API_USER, rights);
    expect(validateAgainst(spec, 'GrantUserRightsResponse', adminRec.lastBody)).toEqual([]);
    expect(g.newlyGrantedRights).toEqual(rights);
    const user = sb.ctx.net.users.get(LEDGER_API_USER)!;
    expect([user.readAs.has(carol.id), user.executeAs.has(carol.id), user.actAs.has(p)]).toEqual([
      true,
      true,
      true,
    ]);
    expect((await admin.grantUserRights(LEDGER_API_USER, rights)).newlyGrantedRights).toEqual([]);
    const listed = (await admin.listUserRights(LEDGER_API_USER)).rights;
    for (const r of rights) expect(listed).toContainEqual(r);

    const rv = await admin.revokeUserRights(LEDGER_API_USER, rights);
    expect(validateAgainst(spec, 'RevokeUserRightsResponse', adminRec.lastBody)).toEqual([]);
    expect(rv.newlyRevokedRights).toEqual(rights);
    expect((await admin.revokeUserRights(LEDGER_API_USER, rights)).newlyRevokedRights).toEqual([]);
    const after = (await admin.listUserRights(LEDGER_API_USER)).rights;
    for (const r of rights) expect(after).not.toContainEqual(r);
    expect(after).toContainEqual({ kind: { CanActAs: { value: { party: carol.id } } } });
  });

  it('an unknown user: USER_NOT_FOUND (404) on list, grant and revoke', async () => {
    const right = [{ kind: { CanReadAs: { value: { party: carol.id } } } }];
    for (const call of [
      () => admin.listUserRights('nobody'),
      () => admin.grantUserRights('nobody', right),
      () => admin.revokeUserRights('nobody', right),
    ]) {
      const e = await rejection(call());
      expect(e.status).toBe(404);
      expect(e.code).toBe('USER_NOT_FOUND');
    }
    expect(validateAgainst(spec, 'JsCantonError', adminRec.lastBody)).toEqual([]);
  });

  it('a non-admin may not grant rights: PERMISSION_DENIED (403)', async () => {
    const e = await rejection(
      userToken.grantUserRights(LEDGER_API_USER, [
        { kind: { CanActAs: { value: { party: sb.ctx.net.dso } } } },
      ]),
    );
    expect(e.status).toBe(403);
    expect(e.code).toBe('PERMISSION_DENIED');
    expect(sb.ctx.net.users.get(LEDGER_API_USER)!.actAs.has(sb.ctx.net.dso)).toBe(false);
  });
});

describe('authorization of the body userId and of reads', () => {
  it("an admin's token acting under another userId: PERMISSION_DENIED (403)", async () => {
    const e = await rejection(admin.prepare(proposal(carol))); // userId LEDGER_API_USER, token of the admin
    expect(e.status).toBe(403);
    expect(e.code).toBe('PERMISSION_DENIED');
    expect(e.detail).toContain("does not match the token's user");
  });

  it('completions, update by offset and active contracts need read rights for every party: PERMISSION_DENIED (403)', async () => {
    // The admin user has no CanReadAs / CanActAs for carol.
    const end = (await admin.ledgerEnd()).offset;
    const c = await rejection(
      admin.completions({ userId: VALIDATOR_USER, parties: [carol.id], beginExclusive: 0 }, { limit: 1 }),
    );
    expect([c.status, c.code]).toEqual([403, 'PERMISSION_DENIED']);
    expect(c.detail).toContain(`may not read as ${carol.id}`);
    const a = await rejection(
      admin.activeContracts({ activeAtOffset: end, eventFormat: { filtersByParty: { [carol.id]: {} } } }),
    );
    expect([a.status, a.code]).toEqual([403, 'PERMISSION_DENIED']);
    const u = await rejection(
      admin.updateByOffset({
        offset: end,
        updateFormat: {
          includeTransactions: {
            eventFormat: { filtersByParty: { [carol.id]: {} } },
            transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
          },
        },
      }),
    );
    expect([u.status, u.code]).toEqual([403, 'PERMISSION_DENIED']);
    expect(u.detail).toContain(`may not read as ${carol.id}`);
    expect(validateAgainst(spec, 'JsCantonError', adminRec.lastBody)).toEqual([]);
    // A party-wildcard read needs CanReadAsAnyParty (the default user has no such right).
    const any = await rejection(
      plain.activeContracts({ activeAtOffset: end, eventFormat: { filtersForAnyParty: {} } }),
    );
    expect([any.status, any.code]).toEqual([403, 'PERMISSION_DENIED']);
    // With the right (carol's actAs is the default user's), the same reads are answered.
    await plain.activeContracts({ activeAtOffset: end, eventFormat: { filtersByParty: { [carol.id]: {} } } });
    await plain.completions(
      { userId: LEDGER_API_USER, parties: [carol.id], beginExclusive: 0 },
      { limit: 1, streamIdleTimeoutMs: 10 },
    );
  });
});

describe('participant state', () => {
  it('connected synchronizers: the sandbox synchronizer with its alias; confirmation for an external party', async () => {
    const all = await admin.connectedSynchronizers();
    expect(validateAgainst(spec, 'GetConnectedSynchronizersResponse', adminRec.lastBody)).toEqual([]);
    expect(all.connectedSynchronizers).toEqual([
      {
        synchronizerAlias: 'global',
        synchronizerId: sb.ctx.net.synchronizerId,
        permission: 'PARTICIPANT_PERMISSION_SUBMISSION',
      },
    ]);
    const forCarol = await admin.connectedSynchronizers({ party: carol.id });
    expect(forCarol.connectedSynchronizers?.map((s) => s.permission)).toEqual([
      'PARTICIPANT_PERMISSION_CONFIRMATION',
    ]);
    expect((await admin.connectedSynchronizers({ party: 'ghost::1220ab' })).connectedSynchronizers).toEqual(
      [],
    );
  });

  it('participant id', async () => {
    const r = await plain.participantId();
    expect(r.participantId).toBe(sb.ctx.net.participantId);
    expect(r.participantId).toMatch(/^sandbox-participant-1::1220[0-9a-f]{64}$/);
  });
});

describe('execute-and-wait-for-transaction', () => {
  it('returns the committed transaction with the created proposal', async () => {
    const { req } = await signedExecute(carol);
    const res = await plain.executeAndWaitForTransaction(req);
    expect(
      validateAgainst(spec, 'JsExecuteSubmissionAndWaitForTransactionResponse', plainRec.lastBody),
    ).toEqual([]);
    const tx = res.transaction;
    expect(tx.updateId).toMatch(/^1220[0-9a-f]{64}$/);
    expect(tx.synchronizerId).toBe(sb.ctx.net.synchronizerId);
    expect(tx.offset).toBeGreaterThan(0);
    expect(tx.offset).toBeLessThanOrEqual(sb.ctx.net.store.ledgerEnd());
    const created = tx.events.flatMap((e) => {
      const c = (e as { CreatedEvent?: { templateId: string; signatories: string[]; contractId: string } })
        .CreatedEvent;
      return c ? [c] : [];
    });
    expect(created).toHaveLength(1);
    expect(created[0]!.templateId).toMatch(
      /:Splice\.Wallet\.TransferPreapproval:TransferPreapprovalProposal$/,
    );
    expect(created[0]!.signatories).toContain(carol.id);
    // The committed update is the one returned (the validator's automation then accepts the proposal).
    const update = sb.ctx.net.store.updateById(tx.updateId)!;
    expect(update.offset).toBe(tx.offset);
    expect(update.events.filter((x) => x.kind === 'created').map((x) => x.contract.contractId)).toEqual([
      created[0]!.contractId,
    ]);
  });
});

describe('classic command submission and reassignment', () => {
  it('submit-and-wait-for-transaction-tree as an external party: NO_SYNCHRONIZER_ON_WHICH_ALL_SUBMITTERS_CAN_SUBMIT (400)', async () => {
    const end = (await plain.ledgerEnd()).offset;
    const e = await rejection(plain.submitAndWaitForTransactionTree(proposal(carol)));
    expect(e.status).toBe(400);
    expect(e.code).toBe('NO_SYNCHRONIZER_ON_WHICH_ALL_SUBMITTERS_CAN_SUBMIT');
    expect(e.cantonError?.errorCategory).toBe(9);
    expect(e.detail).toContain(carol.id);
    expect((await plain.ledgerEnd()).offset).toBe(end);
  });

  it('submit-and-wait-for-reassignment to an unknown synchronizer: INVALID_ARGUMENT (400)', async () => {
    const unknown = `other-domain::1220${'cd'.repeat(32)}`;
    const e = await rejection(
      plain.submitAndWaitForReassignment({
        reassignmentCommands: {
          commandId: randomUUID(),
          submitter: carol.id,
          userId: LEDGER_API_USER,
          commands: [
            {
              command: {
                UnassignCommand: {
                  value: {
                    contractId: `00${'ab'.repeat(32)}`,
                    source: sb.ctx.net.synchronizerId,
                    target: unknown,
                  },
                },
              },
            },
          ],
        },
      }),
    );
    expect(e.status).toBe(400);
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.detail).toContain(unknown);
  });
});

describe('client error paths', () => {
  it('an invalid request is refused client-side; nothing is sent', async () => {
    const end = (await plain.ledgerEnd()).offset;
    const before = plainRec.calls;
    const bad = { ...proposal(carol), actAs: [] };
    const e = await plain.prepare(bad).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(LedgerApiRequestError);
    expect((e as LedgerApiRequestError).field).toBe('actAs');
    const { req } = await signedExecute(carol);
    const afterPrepare = plainRec.calls;
    const badSig = structuredClone(req);
    badSig.partySignatures.signatures[0]!.signatures[0]!.signedBy = 'not-a-fingerprint';
    await expect(plain.executeAndWait(badSig)).rejects.toThrow(LedgerApiRequestError);
    await expect(plain.grantUserRights('', [])).rejects.toThrow(LedgerApiRequestError);
    expect(plainRec.calls).toBe(afterPrepare);
    expect(afterPrepare).toBe(before + 1);
    expect((await plain.ledgerEnd()).offset).toBe(end);
  });

  it('active contracts beyond the ledger end: OFFSET_AFTER_LEDGER_END (400)', async () => {
    const end = (await plain.ledgerEnd()).offset;
    const e = await rejection(
      plain.activeContracts({
        activeAtOffset: end + 10,
        eventFormat: { filtersByParty: { [carol.id]: {} } },
      }),
    );
    expect(e.status).toBe(400);
    expect(e.code).toBe('OFFSET_AFTER_LEDGER_END');
    expect(validateAgainst(spec, 'JsCantonError', plainRec.lastBody)).toEqual([]);
  });

  it('update at an offset with no update: UPDATE_NOT_FOUND (404)', async () => {
    const end = (await plain.ledgerEnd()).offset;
    const e = await rejection(
      plain.updateByOffset({
        offset: end + 1000,
        updateFormat: {
          includeTransactions: {
            eventFormat: { filtersByParty: { [carol.id]: {} } },
            transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
          },
        },
      }),
    );
    expect(e.status).toBe(404);
    expect(e.code).toBe('UPDATE_NOT_FOUND');
  });

  it('latency beyond the client timeout on ledger end: the first attempt times out, the retry succeeds', async () => {
    const before = sb.ctx.faults.applied().length;
    sb.ctx.faults.inject({
      fault: { kind: 'latency', ms: 400 },
      operation: 'ledger-api.ledgerEnd',
      times: 1,
    });
    const rec = recordingFetch();
    const c = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, timeoutMs: 100, retry, fetch: rec.fetch });
    const r = await c.ledgerEnd();
    expect(r.offset).toBe(sb.ctx.net.store.ledgerEnd());
    expect(rec.calls).toBe(2);
    expect(
      sb.ctx.faults
        .applied()
        .slice(before)
        .map((a) => a.kind),
    ).toEqual(['latency']);
  });

  it('a lost response on ledger end: retried and answered', async () => {
    const before = sb.ctx.faults.applied().length;
    sb.ctx.faults.inject({ fault: { kind: 'lostResponse' }, operation: 'ledger-api.ledgerEnd', times: 1 });
    const rec = recordingFetch();
    const c = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, retry, fetch: rec.fetch });
    expect((await c.ledgerEnd()).offset).toBe(sb.ctx.net.store.ledgerEnd());
    expect(rec.calls).toBe(2);
    expect(
      sb.ctx.faults
        .applied()
        .slice(before)
        .map((a) => a.kind),
    ).toEqual(['lostResponse']);
  });

  it('a lost response on executeAndWait: ambiguous error, not retried, and the transaction is on the ledger', async () => {
    const { req } = await signedExecute(carol);
    const end = sb.ctx.net.store.ledgerEnd();
    sb.ctx.faults.inject({
      fault: { kind: 'lostResponse' },
      operation: 'ledger-api.executeAndWait',
      times: 1,
    });
    const rec = recordingFetch();
    const c = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, retry, fetch: rec.fetch });
    const e = await rejection(c.executeAndWait(req));
    expect(e.ambiguous).toBe(true);
    expect(rec.calls).toBe(1);
    expect(sb.ctx.net.store.ledgerEnd()).toBeGreaterThan(end);
    const done = sb.ctx.net.store.completions(end).filter((x) => x.submissionId === req.submissionId);
    expect(done.map((x) => x.status.code)).toEqual([0]);
  });

  it('429 on executeAndWait: PARTICIPANT_BACKPRESSURE, retryable with a delay, but not retried', async () => {
    const { req } = await signedExecute(carol);
    const end = sb.ctx.net.store.ledgerEnd();
    const id = sb.ctx.faults.inject({
      fault: { kind: 'status', status: 429, retryAfterMs: 2000 },
      operation: 'ledger-api.executeAndWait',
      times: 2,
    });
    const e = await rejection(plain.executeAndWait(req));
    expect(e.status).toBe(429);
    expect(e.code).toBe('PARTICIPANT_BACKPRESSURE');
    expect(e.retryable).toBe(true);
    expect(e.retryAfterMs).toBe(2000);
    expect(e.ambiguous).toBe(false);
    expect(validateAgainst(spec, 'JsCantonError', plainRec.lastBody)).toEqual([]);
    const rule = sb.ctx.faults.list().find((f) => f.id === id);
    expect(rule?.fired).toBe(1);
    expect(rule?.remaining).toBe(1);
    sb.ctx.faults.remove(id);
    expect(sb.ctx.net.store.ledgerEnd()).toBe(end);
  });
});
