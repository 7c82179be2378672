/**
 * The offline signer's side of the air gap: `reviewRequest` opens a sealed
 * request (the export key's seal first, against the keys this machine trusts)
 * and checks everything again from the bytes — for a prepared transaction
 * through the one pipeline's pure check (decode, re-hash, intent, command id,
 * window), for onboarding topology through the topology check and the
 * recomputed hashes — and renders what a person confirms; `signReview` signs
 * the re-derived hashes with the party's registered key (pipeline
 * `signAndVerify`: the signature is verified before it leaves) and builds the
 * response. Nothing here opens a socket: this module is loaded on the machine
 * without a network.
 */
import type { DecodedTopologyTransaction, SigningPublicKey } from '../canton/topology/model.js';
import { type SigningParty, signAndVerify, verifyPrepared } from '../flows/pipeline.js';
import { Refusal } from '../flows/refusal.js';
import { describeWindow } from '../flows/window.js';
import { fingerprint, parsePartyId, parsePublicKey } from '../hashing/canton-hash.js';
import { TransactionError } from '../hashing/errors.js';
import { base64ToBytes, bytesToHex } from '../hashing/input.js';
import { inspectTransaction, renderInspectText } from '../intent/inspect.js';
import type { Intent, RecognisedAction } from '../intent/model.js';
import { checkTopology, participantUidOf } from '../intent/topology.js';
import { aKeyOf, type KeyScheme } from '../keys/schemes.js';
import type { CantonSignature, KeyDescription, Signer } from '../keys/signer.js';
import {
  AirGapError,
  type AirGapRequest,
  type AirGapRequestEnvelope,
  type AirGapResponse,
  buildResponse,
  openEnvelope,
  type PreparedAirGapRequest,
  type TopologyAirGapRequest,
  type TrustedExportKey,
  topologyMessages,
} from './format.js';
import { printable, printableDeep, printableText } from './printable.js';

export interface ReviewOptions {
  /** The export keys this machine trusts; a request sealed by any other key is refused. */
  trusted: readonly TrustedExportKey[];
  /** Refuse requests whose window closes sooner than this from now (ms). */
  minWindowMs: number;
  /** Current time in µs since the epoch (tests move it). */
  nowUs?: () => bigint;
}

export interface ReviewWindow {
  earliest?: string;
  latest: string;
  latestSource: string;
  /** `latest` in µs since the epoch. */
  latestUs: bigint;
}

/** A request that passed every check, with what the operator confirms. */
export interface Review {
  kind: AirGapRequest['kind'];
  envelope: AirGapRequestEnvelope;
  request: AirGapRequest;
  /** The signing party; `keyLabel` is empty until `signReview` finds the key. */
  party: SigningParty;
  key: { fingerprint: string; scheme: KeyScheme; publicKeySpki: Uint8Array };
  /** The messages to sign, re-derived here from the bytes (never taken from the request). */
  hashes: Uint8Array[];
  window: ReviewWindow;
  /** Prepared transactions: what the transaction does, as the intent check recognised it. */
  actions: RecognisedAction[];
  /** Topology: the decoded transactions, in order. */
  topology: DecodedTopologyTransaction[];
  /** Fingerprint of the export key whose seal verified. */
  exporter: string;
  /** What a person reads before typing "sign". */
  summary: string;
}

/** The machine-readable reason of a refusal from this module: a Refusal's reason or an AirGapError's code. */
export function refusalCode(e: unknown): string | undefined {
  if (e instanceof Refusal) return e.reason;
  if (e instanceof AirGapError) return e.code;
  return undefined;
}

const systemNowUs = (): bigint => BigInt(Date.now()) * 1000n;

function isoToUs(iso: string, field: string): bigint {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new AirGapError('malformed', `${field} is not a time: ${iso}`, field);
  const frac = /\.(\d{1,6})/.exec(iso)?.[1] ?? '';
  return BigInt(ms) * 1000n + BigInt(frac.padEnd(6, '0').slice(3) || '0');
}

/** "2 h 5 min", "4 min 10 s", "12 s". */
export function formatDurationUs(us: bigint): string {
  let s = Number(us / 1_000_000n);
  if (s < 0) return `${formatDurationUs(-us)} ago`;
  const d = Math.floor(s / 86_400);
  s -= d * 86_400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const parts = [d ? `${d} d` : '', h ? `${h} h` : '', m ? `${m} min` : '', !d && !h && s ? `${s} s` : ''];
  return parts.filter(Boolean).join(' ') || '0 s';
}

/** Expired → window_closed, closes within the minimum → window_too_short. */
function checkWindow(latestUs: bigint, latest: string, source: string, now: bigint, minWindowMs: number) {
  if (latestUs <= now)
    throw new AirGapError(
      'window_closed',
      `the request expired: its window closed at ${latest} (${source}), ${formatDurationUs(now - latestUs)} ago`,
      'request.window.latest',
    );
  if (latestUs <= now + BigInt(minWindowMs) * 1000n)
    throw new AirGapError(
      'window_too_short',
      `the request's window closes at ${latest} (${source}), in ${formatDurationUs(latestUs - now)}: less than the required minimum of ${formatDurationUs(BigInt(minWindowMs) * 1000n)} (--min-window)`,
      'request.window.latest',
    );
}

/**
 * The party the request names, with its key: the key's fingerprint must be
 * the one stated and the party's namespace.
 */
function requestParty(request: AirGapRequest): { party: SigningParty; spki: Uint8Array } {
  let spki: Uint8Array;
  let algorithm: KeyScheme;
  try {
    spki = base64ToBytes(request.key.publicKey, 'request.key.publicKey');
    algorithm = parsePublicKey(spki).algorithm;
  } catch (e) {
    if (!(e instanceof TransactionError)) throw e;
    throw new AirGapError(
      'key_mismatch',
      `the party's key in the request is not a valid public key: ${e.message}`,
      'request.key.publicKey',
    );
  }
  const fp = fingerprint(spki);
  if (fp !== request.key.fingerprint)
    throw new AirGapError(
      'key_mismatch',
      `the party's key in the request has fingerprint ${fp}, not the stated ${request.key.fingerprint}`,
      'request.key.fingerprint',
    );
  if (algorithm !== request.key.scheme)
    throw new AirGapError(
      'key_mismatch',
      `the party's key in the request is ${aKeyOf(algorithm)}, not ${aKeyOf(request.key.scheme)} as stated`,
      'request.key.scheme',
    );
  let ns: string;
  try {
    ns = parsePartyId(request.partyId).fingerprint;
  } catch (e) {
    if (!(e instanceof TransactionError)) throw e;
    throw new AirGapError(
      'party_mismatch',
      `the party id ${request.partyId} is malformed: ${e.message}`,
      'request.partyId',
    );
  }
  if (ns !== fp)
    throw new AirGapError(
      'party_mismatch',
      `party ${request.partyId} is not in the namespace of the request's key ${fp}`,
      'request.partyId',
    );
  return {
    party: {
      partyId: request.partyId,
      keyLabel: '',
      scheme: request.key.scheme,
      fingerprint: fp,
      publicKeySpki: request.key.publicKey,
    },
    spki,
  };
}

/**
 * Opens the envelope (seal first: nothing is read before it verifies) and
 * checks the request again from its bytes. Throws an `AirGapError` or a
 * `Refusal`, each naming what is wrong.
 */
export function reviewRequest(envelope: AirGapRequestEnvelope, opts: ReviewOptions): Review {
  const request = openEnvelope(envelope, opts.trusted);
  const now = (opts.nowUs ?? systemNowUs)();
  return request.kind === 'prepared-transaction'
    ? reviewPrepared(envelope, request, opts, now)
    : reviewTopology(envelope, request, opts, now);
}

function reviewPrepared(
  envelope: AirGapRequestEnvelope,
  request: PreparedAirGapRequest,
  opts: ReviewOptions,
  now: bigint,
): Review {
  const { party, spki } = requestParty(request);
  let verified: ReturnType<typeof verifyPrepared>;
  try {
    verified = verifyPrepared(
      'offline-sign',
      {
        preparedTransaction: request.preparedTransaction,
        claimedHash: request.claimedHash,
        scheme: request.hashingScheme,
      },
      party,
      request.intent,
      { commandId: request.commandId, minWindowMs: opts.minWindowMs, nowUs: () => now },
    );
  } catch (e) {
    // The window rules are the air gap's own codes (expired vs shorter than the minimum).
    if (e instanceof Refusal && e.reason === 'window_closed') {
      const latest = e.details.latest ?? request.window.latest;
      checkWindow(isoToUs(latest, 'window'), latest, e.details.source ?? '', now, opts.minWindowMs);
    }
    throw e;
  }
  const md = verified.tx.metadata;
  if (md.synchronizerId !== request.synchronizerId)
    throw new Refusal(
      'intent_mismatch',
      `the request is for synchronizer ${request.synchronizerId}, but the transaction is for ${md.synchronizerId}`,
    );
  const w = describeWindow(verified.window);
  const stated = request.window;
  if (
    w.latest !== stated.latest ||
    w.latestSource !== stated.latestSource ||
    (w.earliest ?? null) !== (stated.earliest ?? null)
  )
    throw new AirGapError(
      'malformed',
      `the request states the window ${windowText(stated)}, but the transaction's window is ${windowText(w)}`,
      'request.window',
    );
  const window: ReviewWindow = { ...w, latestUs: verified.window.latestUs };
  const review: Review = {
    kind: request.kind,
    envelope,
    request,
    party,
    key: { fingerprint: party.fingerprint, scheme: party.scheme, publicKeySpki: spki },
    hashes: [verified.hash],
    window,
    actions: verified.actions,
    topology: [],
    exporter: envelope.exportKey.fingerprint,
    summary: '',
  };
  // Everything the transaction or the request says is shown escaped: no control character reaches the terminal.
  const report = printableDeep(inspectTransaction(verified.tx, verified.scheme));
  review.summary = printableText(
    `${header(review, now, [
      ['intent', intentText(request.intent)],
      ['command id', printable(request.commandId)],
      ['synchronizer', printable(request.synchronizerId)],
      [
        'hash',
        `${bytesToHex(verified.hash)} (${request.hashingScheme.toUpperCase()}, recomputed here = claimed)`,
      ],
    ])}\nChecked here: the export seal, the transaction decoded strictly and re-hashed to the claimed hash, the intent, the command id, the window.\n\n${renderInspectText(report)}`,
  );
  return review;
}

function reviewTopology(
  envelope: AirGapRequestEnvelope,
  request: TopologyAirGapRequest,
  opts: ReviewOptions,
  now: bigint,
): Review {
  const { party, spki } = requestParty(request);
  const e = request.expect;
  const check = checkTopology(
    request.transactions.map((transaction, i) => ({
      transaction,
      // The validator path signs each transaction's hash: the claimed one must be it.
      ...(e.path === 'validator' ? { claimedHash: request.claimedHashes[i] ?? '' } : {}),
    })),
    {
      partyId: request.partyId,
      publicKeySpki: spki,
      scheme: request.key.scheme,
      participantUid: e.participantUid,
      permission: e.permission,
      threshold: e.threshold,
      path: e.path,
    },
  );
  if (check.problems.length > 0)
    throw new Refusal(
      'topology_mismatch',
      `the topology transactions are not the onboarding that was asked for: ${check.problems.map((p) => p.message).join('; ')}`,
      check.problems,
    );
  const messages = topologyMessages(request);
  const claimed = request.claimedHashes;
  if (messages.length !== claimed.length || messages.some((m, i) => bytesToHex(m) !== claimed[i]))
    throw new Refusal(
      'hash_mismatch',
      `the request asks for signatures over ${claimed.join(', ')}, but the transactions hash to ${messages.map(bytesToHex).join(', ')} (${e.path} path)`,
      [],
      { claimed: claimed.join(','), computed: messages.map(bytesToHex).join(',') },
    );
  const latestUs = isoToUs(request.window.latest, 'request.window.latest');
  checkWindow(latestUs, request.window.latest, request.window.latestSource, now, opts.minWindowMs);
  const review: Review = {
    kind: request.kind,
    envelope,
    request,
    party,
    key: { fingerprint: party.fingerprint, scheme: party.scheme, publicKeySpki: spki },
    hashes: messages,
    window: { ...request.window, latestUs },
    actions: [],
    topology: check.decoded,
    exporter: envelope.exportKey.fingerprint,
    summary: '',
  };
  const lines = [
    `Onboarding of external party ${printable(request.partyId)}: ${check.decoded.length} topology transaction${check.decoded.length === 1 ? '' : 's'}, ${e.path === 'validator' ? 'validator path (one signature per transaction)' : 'Ledger API path (one signature over their multi-hash)'}`,
    `Expected: hosted on ${printable(participantUidOf(e.participantUid))} (${e.permission}), confirmation threshold ${e.threshold}, the party's only key ${party.fingerprint}`,
    '',
  ];
  check.decoded.forEach((d, i) => {
    lines.push(...topologyText(d, i));
  });
  lines.push('', `Hashes to sign (recomputed here = claimed):`);
  for (const m of messages) lines.push(`  ${bytesToHex(m)}`);
  review.summary = printableText(
    `${header(review, now, [['synchronizer', printable(request.synchronizerId)]])}\nChecked here: the export seal, every transaction decoded strictly, the mappings are exactly this onboarding, the hashes, the window.\n\n${lines.join('\n')}\n`,
  );
  return review;
}

function windowText(w: { earliest?: string; latest: string; latestSource: string }): string {
  return `${w.earliest ? `from ${w.earliest} ` : ''}until ${w.latest} (${w.latestSource})`;
}

function intentText(intent: Intent): string {
  return Object.entries(intent)
    .map(([k, v]) => `${k}=${printable(typeof v === 'string' ? v : JSON.stringify(v))}`)
    .join(', ');
}

function header(r: Review, now: bigint, extra: [string, string][]): string {
  const req = r.request;
  const rows: [string, string][] = [
    ['kind', r.kind],
    ['party', printable(req.partyId)],
    ['key', `${r.key.fingerprint} (${r.key.scheme})`],
    ...extra,
    [
      'window',
      `latest ${printable(r.window.latest)} (${printable(r.window.latestSource)}), ${formatDurationUs(r.window.latestUs - now)} left${r.window.earliest ? `; not before ${printable(r.window.earliest)}` : ''}`,
    ],
    ['created at', printable(req.createdAt)],
    ['exported by', `${r.exporter} (trusted export key, seal verified)`],
    ['request', `digest ${r.envelope.digest}, nonce ${req.nonce}`],
  ];
  const width = Math.max(...rows.map(([k]) => k.length)) + 2;
  return `AIR-GAP SIGNING REQUEST\n${rows.map(([k, v]) => `  ${`${k}:`.padEnd(width)}${v}`).join('\n')}\n`;
}

function keyText(k: SigningPublicKey): string {
  let fp: string;
  try {
    fp = fingerprint(k.publicKey);
  } catch {
    fp = '(invalid key)';
  }
  return `${fp} (${k.keySpec}, usage ${k.usage.join(' + ') || 'none'})`;
}

function topologyText(d: DecodedTopologyTransaction, i: number): string[] {
  const t = d.transaction;
  const m = t.mapping;
  const head = `  [${i}] ${t.operation.toUpperCase()} serial ${t.serial}, hash ${bytesToHex(d.hash)}`;
  switch (m.kind) {
    case 'namespace_delegation':
      return [
        head,
        `      NamespaceDelegation of namespace ${printable(m.namespace)}`,
        `      to key ${keyText(m.targetKey)}`,
        `      restriction: ${m.restriction?.kind ?? (m.isRootDelegation ? 'root delegation' : 'none')}`,
      ];
    case 'party_to_key_mapping':
      return [
        head,
        `      PartyToKeyMapping of ${printable(m.party)}, signing threshold ${m.threshold}`,
        ...m.signingKeys.map((k) => `      signing key ${keyText(k)}`),
      ];
    case 'party_to_participant':
      return [
        head,
        `      PartyToParticipant of ${printable(m.party)}, confirmation threshold ${m.threshold}`,
        ...m.participants.map(
          (p) =>
            `      hosted on ${printable(p.participantUid)} (${p.permission}${p.onboarding ? ', onboarding' : ''})`,
        ),
        ...(m.partySigningKeys
          ? [
              `      party signing threshold ${m.partySigningKeys.threshold}`,
              ...m.partySigningKeys.keys.map((k) => `      party signing key ${keyText(k)}`),
            ]
          : []),
      ];
  }
}

export interface SignReviewOptions {
  /** The key to sign with; it must be the request's key. Default: the key here with that fingerprint. */
  keyLabel?: string;
  /** Current time in µs since the epoch (tests move it); the window is checked again at signing. */
  nowUs?: () => bigint;
  signedAt?: Date;
}

/** The key of this machine that signs for `review`: by label (which must match) or by fingerprint. */
export async function findSigningKey(
  review: Review,
  signer: Signer,
  keyLabel?: string,
): Promise<KeyDescription> {
  const want = review.key.fingerprint;
  if (keyLabel !== undefined) {
    const d = await signer.describe(keyLabel);
    if (d.fingerprint !== want)
      throw new AirGapError(
        'key_mismatch',
        `key ${keyLabel} (${d.fingerprint}) is not the key this request must be signed with (${want}, party ${review.party.partyId})`,
        'request.key.fingerprint',
      );
    if (d.backend === 'offline')
      throw new AirGapError(
        'key_mismatch',
        `key ${keyLabel} is a cold key's public key only: its private key is not on this machine`,
      );
    return d;
  }
  const all = await signer.list();
  const usable = all.filter((k) => k.fingerprint === want && k.backend !== 'offline' && !k.disabled);
  if (usable.length === 0)
    throw new AirGapError(
      'key_mismatch',
      all.some((k) => k.fingerprint === want)
        ? `the key ${want} of party ${review.party.partyId} is here, but disabled or public only: it cannot sign`
        : `no key here has fingerprint ${want} (party ${review.party.partyId}): this request is for another key (${all.length} key${all.length === 1 ? '' : 's'} here)`,
      'request.key.fingerprint',
    );
  return usable[0]!;
}

/**
 * Signs each re-derived hash of a reviewed request with the party's key
 * (checked to be the registered one; each signature verified before it is
 * kept) and builds the response.
 */
export async function signReview(
  review: Review,
  signer: Signer,
  opts: SignReviewOptions = {},
): Promise<AirGapResponse> {
  const now = (opts.nowUs ?? systemNowUs)();
  if (review.window.latestUs <= now)
    throw new AirGapError(
      'window_closed',
      `the request expired while it was reviewed: its window closed at ${review.window.latest} (${review.window.latestSource})`,
      'request.window.latest',
    );
  const key = await findSigningKey(review, signer, opts.keyLabel);
  const party: SigningParty = { ...review.party, keyLabel: key.label };
  const signatures: CantonSignature[] = [];
  for (const h of review.hashes) signatures.push((await signAndVerify(signer, party, h)).signature);
  return buildResponse(review.envelope, review.hashes, signatures, opts.signedAt ?? new Date());
}
