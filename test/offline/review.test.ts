/**
 * The offline signer's review and signing (src/offline/review.ts) on real
 * requests: preparations from the sandbox participant and onboarding topology
 * from its validator and Ledger API, sealed by an export key. A valid request
 * is signed (file key and SoftHSM2 key) and the response verifies against the
 * party's key; every field changed in transit is refused by the seal; content
 * re-sealed by an untrusted key is refused; content re-sealed by the trusted
 * key is still checked again from the bytes (hash, intent, command id, key,
 * party, window); expired and too-short windows, wrong keys, unknown versions
 * and members are refused, each with its code.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { decodeTopologyTransaction, encodeTopologyTransaction } from '../../src/canton/topology/codec.js';
import { base64ToBytes, bytesToBase64, bytesToHex } from '../../src/hashing/input.js';
import { verifySignature } from '../../src/keys/schemes.js';
import type { KeyDescription } from '../../src/keys/signer.js';
import {
  type AirGapRequestEnvelope,
  type PreparedAirGapRequest,
  parseRequestEnvelope,
  parseResponse,
  requestDigest,
  type TopologyAirGapRequest,
  type TrustedExportKey,
  topologyMessages,
  trustedExportKey,
} from '../../src/offline/format.js';
import {
  type Review,
  type ReviewOptions,
  refusalCode,
  reviewRequest,
  signReview,
} from '../../src/offline/review.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type FlowEnv, flowEnv, testSigner } from '../support/flow-env.js';
import {
  copy,
  leafPaths,
  ledgerTopologyRequest,
  mutateAt,
  preparedRequest,
  seal,
  validatorTopologyRequest,
} from '../support/offline-env.js';

let env: FlowEnv;
let alice: PartyRecord;
let bob: PartyRecord;
let hsmCarol: PartyRecord;
let exportKey: KeyDescription;
let trusted: TrustedExportKey[];
let valid: AirGapRequestEnvelope;
let request: PreparedAirGapRequest;

const EXPORT = 'export-key';
const ROGUE = 'rogue-export-key';
const opts = () => ({ trusted, minWindowMs: 5 * 60_000 });

beforeAll(async () => {
  env = await flowEnv({ seed: 'offline-review', hsm: true });
  alice = await env.addParty('alice');
  bob = await env.addParty('bob', { scheme: 'ecdsa-p256' });
  hsmCarol = await env.addParty('carol', { backend: 'pkcs11', scheme: 'ecdsa-p256' });
  exportKey = await env.signer.generate({ label: EXPORT, scheme: 'ed25519', backend: 'file' });
  await env.signer.generate({ label: ROGUE, scheme: 'ed25519', backend: 'file' });
  trusted = [trustedExportKey(exportKey.scheme, exportKey.publicKeySpki)];
  request = await preparedRequest(env.ledger, env.net, alice);
  valid = await seal(request, env.signer, EXPORT);
}, 120_000);
afterAll(async () => env?.close());

/** What `f` threw: its code (Refusal reason or AirGapError code), message and field. */
function refused(f: () => unknown): { code: string | undefined; message: string; field?: string } {
  try {
    f();
  } catch (e) {
    const code = refusalCode(e);
    expect(code, `expected a refusal, got ${String(e)}`).toBeDefined();
    return { code, message: (e as Error).message, field: (e as { field?: string }).field };
  }
  throw new Error('expected a refusal, but the request was accepted');
}

async function refusedAsync(p: Promise<unknown>): Promise<{ code: string | undefined; message: string }> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e, 'expected a refusal').toBeDefined();
  expect(refusalCode(e), `expected a refusal, got ${String(e)}`).toBeDefined();
  return { code: refusalCode(e), message: (e as Error).message };
}

/** As the offline side reads it: the text crosses the gap, is parsed strictly, then reviewed. */
const reviewText = (envelope: unknown, o: ReviewOptions = opts()) =>
  reviewRequest(parseRequestEnvelope(JSON.stringify(envelope)), o);

function expectVerifies(review: Review, party: PartyRecord, response: ReturnType<typeof parseResponse>) {
  expect(response.hashes).toEqual(review.hashes.map(bytesToHex));
  expect(response.signerFingerprint).toBe(party.fingerprint);
  expect(response.requestDigest).toBe(review.envelope.digest);
  expect(response.nonce).toBe(review.request.nonce);
  review.hashes.forEach((h, i) => {
    const sig = response.signatures[i]!;
    expect(sig.signedBy).toBe(party.fingerprint);
    expect(
      verifySignature(party.scheme, base64ToBytes(party.publicKeySpki), h, base64ToBytes(sig.signature)),
    ).toBe(true);
  });
}

describe('a valid prepared-transaction request', () => {
  it('is reviewed (summary with intent, party, key, hash, window, command id, exporter) and signed with the file key', async () => {
    const r = reviewText(valid);
    expect(r.kind).toBe('prepared-transaction');
    expect(bytesToHex(r.hashes[0]!)).toBe(request.claimedHash);
    expect(r.actions.map((a) => a.kind)).toEqual(['preapproval-proposal']);
    for (const s of [
      alice.partyId,
      alice.fingerprint,
      request.claimedHash,
      request.commandId,
      request.createdAt,
      request.window.latest,
      exportKey.fingerprint,
      'preapproval-proposal',
      env.net.validatorParty,
      'Prepared transaction: Daml-LF', // the inspect rendering
      'TransferPreapprovalProposal',
    ])
      expect(r.summary).toContain(s);
    expect(r.summary).toMatch(/\d+ h( \d+ min)? left/);
    const response = parseResponse(JSON.stringify(await signReview(r, env.signer)));
    expectVerifies(r, alice, response);
  });

  it('an ECDSA P-256 file key and a SoftHSM2 key sign too; the signatures verify against the party key', async () => {
    for (const p of [bob, hsmCarol]) {
      const env2 = await seal(await preparedRequest(env.ledger, env.net, p), env.signer, EXPORT);
      const r = reviewText(env2);
      const sign = vi.spyOn(env.signer, 'sign');
      const response = parseResponse(JSON.stringify(await signReview(r, env.signer)));
      expect(sign).toHaveBeenCalledTimes(1);
      expect(sign.mock.calls[0]![0]).toBe(p.keyLabel);
      sign.mockRestore();
      expectVerifies(r, p, response);
    }
    expect(hsmCarol.keyLabel).toBeTruthy();
    expect((await env.signer.describe(hsmCarol.keyLabel)).backend).toBe('pkcs11');
  });

  it('the response signs the hash re-derived here, so it can be submitted: the sandbox executes it', async () => {
    const r = reviewText(valid);
    const response = await signReview(r, env.signer);
    const out = await env.ledger.executeAndWait({
      preparedTransaction: request.preparedTransaction,
      partySignatures: { signatures: [{ party: alice.partyId, signatures: response.signatures }] },
      submissionId: crypto.randomUUID(),
      userId: env.ctx.userId,
      hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
    });
    expect(out.updateId).toMatch(/./);
  });
});

describe('changed in transit (not re-sealed): refused by the seal, naming the field', () => {
  it('every leaf of the envelope, changed to another valid value, is refused', () => {
    const paths = leafPaths(valid);
    const names = paths.map((p) => p.join('.'));
    // The members the request consists of are all among them.
    for (const m of [
      'request.format',
      'request.kind',
      'request.synchronizerId',
      'request.partyId',
      'request.key.fingerprint',
      'request.key.scheme',
      'request.key.publicKey',
      'request.hashingScheme',
      'request.preparedTransaction',
      'request.claimedHash',
      'request.intent.kind',
      'request.intent.receiver',
      'request.intent.provider',
      'request.commandId',
      'request.window.latest',
      'request.window.latestSource',
      'request.createdAt',
      'request.nonce',
      'digest',
      'exportKey.fingerprint',
      'exportKey.scheme',
      'exportKey.publicKey',
      'exportSignature.format',
      'exportSignature.signature',
      'exportSignature.signedBy',
      'exportSignature.signingAlgorithmSpec',
    ])
      expect(names).toContain(m);
    const seen: Record<string, string> = {};
    for (const path of paths) {
      const name = path.join('.');
      const tampered = mutateAt(valid, path);
      expect(JSON.stringify(tampered), name).not.toBe(JSON.stringify(valid));
      const r = refused(() => reviewText(tampered));
      seen[name] = r.code!;
      const want =
        name === 'request.format' || name === 'request.kind' || name === 'request.intent.kind'
          ? 'malformed' // another version / kind: the strict parse refuses it before the seal
          : name.startsWith('exportKey.')
            ? 'untrusted_exporter'
            : 'export_signature_invalid';
      expect(r.code, `${name}: ${r.message}`).toBe(want);
      if (want === 'export_signature_invalid' && name.startsWith('request.'))
        expect(r.field, name).toBe('envelope.digest');
      if (name === 'exportSignature.signature') expect(r.field).toBe('envelope.exportSignature.signature');
      if (name === 'exportSignature.signedBy') expect(r.field).toBe('envelope.exportSignature.signedBy');
    }
    expect(Object.keys(seen).length).toBe(paths.length);
  });

  it('a request re-sealed by an export key that is not trusted here: untrusted_exporter', async () => {
    const changed = { ...copy(request), intent: { ...request.intent, provider: env.net.mallory } };
    const rogue = await seal(changed as PreparedAirGapRequest, env.signer, ROGUE);
    const r = refused(() => reviewText(rogue));
    expect(r.code).toBe('untrusted_exporter');
    expect(r.message).toContain(rogue.exportKey.fingerprint);
    // ... and the same with no trusted key at all, or a rogue key claiming the trusted fingerprint
    expect(refused(() => reviewText(valid, { trusted: [], minWindowMs: 0 })).message).toMatch(/--trust/);
    const impostor = {
      ...copy(rogue),
      exportKey: { ...rogue.exportKey, fingerprint: exportKey.fingerprint },
    };
    expect(refused(() => reviewText(impostor)).code).toBe('untrusted_exporter');
  });
});

describe('re-sealed by the trusted key: the offline side still checks the content', () => {
  const resealed = async (change: (r: PreparedAirGapRequest) => void, base = request) => {
    const r = copy(base);
    change(r);
    return seal(r, env.signer, EXPORT);
  };

  it('each changed member is refused with its own reason', async () => {
    const other = await preparedRequest(env.ledger, env.net, alice); // another preparation (command id)
    const cases: [string, (r: PreparedAirGapRequest) => void, string, RegExp?][] = [
      [
        'intent.provider',
        (r) => {
          r.intent = { ...r.intent, provider: env.net.mallory } as never;
        },
        'intent_mismatch',
        new RegExp(env.net.mallory.slice(0, 10)),
      ],
      [
        'intent.receiver',
        (r) => {
          r.intent = { ...r.intent, receiver: bob.partyId } as never;
        },
        'bad_request',
      ],
      [
        'claimedHash',
        (r) => {
          r.claimedHash = '00'.repeat(32);
        },
        'hash_mismatch',
      ],
      [
        'hashingScheme',
        (r) => {
          r.hashingScheme = 'v3';
        },
        'hash_mismatch',
      ],
      [
        'preparedTransaction (another preparation, its own hash)',
        (r) => {
          r.preparedTransaction = other.preparedTransaction;
          r.claimedHash = other.claimedHash;
        },
        'intent_mismatch',
        /command id/,
      ],
      [
        'preparedTransaction (not a transaction)',
        (r) => {
          r.preparedTransaction = 'CgUBAgMEBQ==';
        },
        'decode_failed',
      ],
      [
        'commandId',
        (r) => {
          r.commandId = 'another-command';
        },
        'intent_mismatch',
        /command id/,
      ],
      [
        'synchronizerId',
        (r) => {
          r.synchronizerId = 'other::1220aa';
        },
        'intent_mismatch',
        /synchronizer/,
      ],
      [
        'window.latest',
        (r) => {
          r.window = {
            ...r.window,
            latest: new Date(Date.parse(r.window.latest) + 86_400_000).toISOString(),
          };
        },
        'malformed',
        /window/,
      ],
      [
        'window.latestSource',
        (r) => {
          r.window = { ...r.window, latestSource: 'made up' };
        },
        'malformed',
        /window/,
      ],
      [
        "key (bob's key)",
        (r) => {
          r.key = { fingerprint: bob.fingerprint, scheme: bob.scheme, publicKey: bob.publicKeySpki };
        },
        'party_mismatch',
        /namespace/,
      ],
      [
        'key.fingerprint',
        (r) => {
          r.key = { ...r.key, fingerprint: bob.fingerprint };
        },
        'key_mismatch',
        /fingerprint/,
      ],
      [
        'key.scheme',
        (r) => {
          r.key = { ...r.key, scheme: 'ecdsa-p256' };
        },
        'key_mismatch',
      ],
      [
        'partyId',
        (r) => {
          r.partyId = bob.partyId;
        },
        'party_mismatch',
      ],
    ];
    for (const [name, change, code, msg] of cases) {
      const sealed = await resealed(change);
      const r = refused(() => reviewText(sealed));
      expect(r.code, `${name}: ${r.message}`).toBe(code);
      if (msg) expect(r.message, name).toMatch(msg);
    }
    // createdAt and nonce are the exporter's own facts: covered by the seal only.
    const fresh = await resealed((r) => {
      r.createdAt = new Date(Date.now() - 60_000).toISOString();
      r.nonce = 'ab'.repeat(32);
    });
    expect(reviewText(fresh).request.nonce).toBe('ab'.repeat(32));
  });
});

describe('windows', () => {
  it('expired: window_closed; closing sooner than the minimum: window_too_short; the real 24 h window passes 5 min', () => {
    const r = reviewText(valid);
    const latest = r.window.latestUs;
    const expired = refused(() => reviewText(valid, { ...opts(), nowUs: () => latest + 1n }));
    expect(expired.code).toBe('window_closed');
    expect(expired.message).toContain(r.window.latest);
    const short = refused(() => reviewText(valid, { ...opts(), nowUs: () => latest - 60_000_000n }));
    expect(short.code).toBe('window_too_short');
    expect(short.message).toMatch(/1 min.*5 min/);
    const tooLong = refused(() => reviewText(valid, { trusted, minWindowMs: 25 * 3_600_000 }));
    expect(tooLong.code).toBe('window_too_short');
    expect(reviewText(valid, { ...opts(), nowUs: () => latest - 6n * 60_000_000n }).kind).toBe(
      'prepared-transaction',
    );
  });

  it('a request that expires between review and signing is not signed', async () => {
    const r = reviewText(valid);
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusedAsync(signReview(r, env.signer, { nowUs: () => r.window.latestUs }));
    expect(e.code).toBe('window_closed');
    expect(sign).not.toHaveBeenCalled();
    sign.mockRestore();
  });
});

describe('the wrong key', () => {
  it("a machine without the request's key refuses (naming the fingerprint); --key naming another key refuses", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'canton-signer-offline-other-'));
    const other = testSigner(dir, 'other');
    try {
      await other.generate({ label: 'someone', scheme: 'ed25519', backend: 'file' });
      const r = reviewText(valid);
      const e = await refusedAsync(signReview(r, other));
      expect(e.code).toBe('key_mismatch');
      expect(e.message).toContain(alice.fingerprint);
    } finally {
      await other.close();
      await rm(dir, { recursive: true, force: true });
    }
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusedAsync(signReview(reviewText(valid), env.signer, { keyLabel: bob.keyLabel }));
    expect(e.code).toBe('key_mismatch');
    expect(e.message).toContain(bob.keyLabel);
    expect(sign).not.toHaveBeenCalled();
    sign.mockRestore();
    // the right label is accepted
    const ok = await signReview(reviewText(valid), env.signer, { keyLabel: alice.keyLabel });
    expect(ok.signerFingerprint).toBe(alice.fingerprint);
  });
});

describe('format', () => {
  it('an unknown format version is refused, naming the version', () => {
    const v2 = mutateAt(valid, ['request', 'format'], () => 'canton-signer/air-gap-request@2');
    const r = refused(() => reviewText(v2));
    expect(r.code).toBe('malformed');
    expect(r.message).toMatch(/air-gap-request@2 is not supported/);
    expect(r.field).toBe('request.format');
  });

  it('an unknown member anywhere is refused, naming it', () => {
    for (const [path, key] of [
      [[], 'extra'],
      [['request'], 'note'],
      [['request', 'intent'], 'amount'],
      [['request', 'window'], 'grace'],
      [['exportSignature'], 'comment'],
    ] as [string[], string][]) {
      const t = copy(valid) as unknown as Record<string, unknown>;
      let o = t;
      for (const k of path) o = o[k] as Record<string, unknown>;
      o[key] = 'x';
      const r = refused(() => reviewText(t));
      expect(r.code, `${[...path, key].join('.')}`).toBe('malformed');
      expect(r.message, `${[...path, key].join('.')}`).toContain(key);
    }
  });
});

describe('topology-transactions', () => {
  it('validator path: checked, listed, each transaction hash signed; the signatures verify', async () => {
    const key = await env.signer.generate({ label: 'onboard-val', scheme: 'ed25519', backend: 'file' });
    const req = await validatorTopologyRequest(env.validator, env.ledger, env.net, key, 'offval');
    const r = reviewText(await seal(req, env.signer, EXPORT));
    expect(r.kind).toBe('topology-transactions');
    expect(r.hashes.map(bytesToHex)).toEqual(req.claimedHashes);
    expect(r.hashes.length).toBe(3);
    for (const s of [
      'NamespaceDelegation',
      'PartyToKeyMapping',
      'PartyToParticipant',
      req.partyId,
      key.fingerprint,
      req.expect.participantUid,
      'confirmation',
    ])
      expect(r.summary).toContain(s);
    const response = parseResponse(JSON.stringify(await signReview(r, env.signer)));
    expect(response.signatures.length).toBe(3);
    r.hashes.forEach((h, i) => {
      expect(
        verifySignature('ed25519', key.publicKeySpki, h, base64ToBytes(response.signatures[i]!.signature)),
      ).toBe(true);
    });
    // The validator accepts them: the party is onboarded.
    const submitted = await env.validator.submitTopology({
      public_key: bytesToHex(key.publicKeyRaw),
      signed_topology_txs: req.transactions.map((t, i) => ({
        topology_tx: t,
        signed_hash: Buffer.from(response.signatures[i]!.signature, 'base64').toString('hex'),
      })),
    });
    expect(submitted.party_id).toBe(req.partyId);
  });

  it('Ledger API path (SoftHSM2 key): one signature over the recomputed multi-hash', async () => {
    const key = await env.signer.generate({ label: 'onboard-hsm', scheme: 'ecdsa-p256', backend: 'pkcs11' });
    const req = await ledgerTopologyRequest(env.ledger, env.net, key, 'offhsm');
    const r = reviewText(await seal(req, env.signer, EXPORT));
    expect(r.hashes.map(bytesToHex)).toEqual(req.claimedHashes);
    const response = await signReview(r, env.signer);
    expect(response.signatures.length).toBe(1);
    expect(
      verifySignature(
        'ecdsa-p256',
        key.publicKeySpki,
        r.hashes[0]!,
        base64ToBytes(response.signatures[0]!.signature),
      ),
    ).toBe(true);
  });

  it('topology whose hashes or mappings are not the onboarding asked for is refused, even re-sealed', async () => {
    const key = await env.signer.generate({ label: 'onboard-bad', scheme: 'ed25519', backend: 'file' });
    const req = await validatorTopologyRequest(env.validator, env.ledger, env.net, key, 'offbad');
    const cases: [string, (r: typeof req) => void, string, RegExp][] = [
      [
        'claimedHashes',
        (r) => {
          r.claimedHashes = [r.claimedHashes[1]!, r.claimedHashes[0]!, r.claimedHashes[2]!];
        },
        'topology_mismatch',
        /claimed hash/,
      ],
      [
        'expect.participantUid',
        (r) => {
          r.expect = { ...r.expect, participantUid: 'other::1220ab' };
        },
        'topology_mismatch',
        /hosting participant/,
      ],
      [
        'expect.threshold',
        (r) => {
          r.expect = { ...r.expect, threshold: 2 };
        },
        'topology_mismatch',
        /threshold/,
      ],
      [
        'expect.path',
        (r) => {
          r.expect = { ...r.expect, path: 'ledger-api' };
        },
        'hash_mismatch',
        /multi-hash|ledger-api/,
      ],
      [
        'transactions (dropped one)',
        (r) => {
          r.transactions = r.transactions.slice(1);
          r.claimedHashes = r.claimedHashes.slice(1);
        },
        'topology_mismatch',
        /NamespaceDelegation/,
      ],
      [
        'window expired',
        (r) => {
          r.window = { ...r.window, latest: new Date(Date.now() - 1000).toISOString() };
        },
        'window_closed',
        /expired/,
      ],
      [
        'window too short',
        (r) => {
          r.window = { ...r.window, latest: new Date(Date.now() + 60_000).toISOString() };
        },
        'window_too_short',
        /minimum/,
      ],
    ];
    for (const [name, change, code, msg] of cases) {
      const r = copy(req);
      change(r);
      const sealed = await seal(r, env.signer, EXPORT);
      const e = refused(() => reviewText(sealed));
      expect(e.code, `${name}: ${e.message}`).toBe(code);
      expect(e.message, name).toMatch(msg);
    }
  });

  describe('text from the request cannot forge a line of what the operator reads', () => {
    const FORGED = '\n  Expected: hosted on trusted-participant::1220ff (submission)';
    /** Every line of the summary that starts with the forged text (after indentation). */
    const forgedLines = (summary: string) =>
      summary.split('\n').filter((l) => l.trimStart().startsWith('Expected: hosted on trusted-participant'));

    /** Sealed as the export key would, but without the export's schema check (a hostile online side). */
    async function sealUnchecked(r: TopologyAirGapRequest): Promise<AirGapRequestEnvelope> {
      const digest = requestDigest(r);
      const out = await env.signer.sign(EXPORT, digest);
      return {
        request: r,
        digest: bytesToHex(digest),
        exportKey: {
          fingerprint: out.key.fingerprint,
          scheme: out.key.scheme,
          publicKey: bytesToBase64(out.key.publicKeySpki),
        },
        exportSignature: out.signature,
      };
    }

    it('a participant uid with a line break (expected and in the transaction): shown escaped, on its line', async () => {
      const key = await env.signer.generate({ label: 'onboard-inject', scheme: 'ed25519', backend: 'file' });
      const req = await validatorTopologyRequest(env.validator, env.ledger, env.net, key, 'offinject');
      const uid = `${req.expect.participantUid}${FORGED}`;
      // The topology itself names that participant, so that the topology check agrees with the request.
      req.transactions = req.transactions.map((t) => {
        const d = decodeTopologyTransaction(t);
        const m = d.transaction.mapping;
        if (m.kind !== 'party_to_participant') return t;
        const participants = m.participants.map((p) => ({ ...p, participantUid: uid }));
        return bytesToBase64(
          encodeTopologyTransaction({ ...d.transaction, mapping: { ...m, participants } }, d.version),
        );
      });
      req.expect = { ...req.expect, participantUid: uid };
      req.claimedHashes = topologyMessages(req).map(bytesToHex);
      const r = reviewText(await seal(req, env.signer, EXPORT));
      expect(forgedLines(r.summary)).toEqual([]);
      // Both the expectation and the decoded transaction's copy are there, escaped.
      expect(r.summary.split('\\u{a}  Expected: hosted on trusted-participant').length).toBe(3);
    });

    it('a window source with a line break: refused by the request format; if it got through, shown escaped', async () => {
      const key = await env.signer.generate({
        label: 'onboard-inject-w',
        scheme: 'ed25519',
        backend: 'file',
      });
      const req = await validatorTopologyRequest(env.validator, env.ledger, env.net, key, 'offinjectw');
      req.window = { ...req.window, latestSource: `onboarding request expiry${FORGED}` };
      // The online side cannot export it, and the offline side does not read it.
      await expect(seal(req, env.signer, EXPORT)).rejects.toThrow(/latestSource/);
      const unchecked = await sealUnchecked(req);
      const e = refused(() => reviewText(unchecked));
      expect(e.code).toBe('malformed');
      expect(e.field).toBe('envelope.request.window.latestSource');
      for (const bad of ['', ' x', 'a'.repeat(121), 'x\u202ey', 'x\ry', 'x\u001b[2Ky'])
        expect(
          () =>
            parseRequestEnvelope(
              JSON.stringify({
                ...unchecked,
                request: { ...req, window: { ...req.window, latestSource: bad } },
              }),
            ),
          JSON.stringify(bad),
        ).toThrow(/latestSource/);
      // Reviewed without the format check (a caller that skips parsing): the line is not forged either.
      const r = reviewRequest(unchecked, opts());
      expect(forgedLines(r.summary)).toEqual([]);
      expect(r.summary).toContain(
        '(onboarding request expiry\\u{a}  Expected: hosted on trusted-participant',
      );
      // Every real window source still passes.
      for (const ok of [
        'max_record_time',
        'preparation-time tolerance',
        'max ledger effective time',
        'mining round 12 closes',
        'mining round ? closes',
        'executeBefore',
        'air-gap onboarding request lifetime',
      ]) {
        const fine = await seal({ ...req, window: { ...req.window, latestSource: ok } }, env.signer, EXPORT);
        expect(fine.request.window.latestSource).toBe(ok);
      }
    });
  });
});
