/**
 * The air-gap payloads: what crosses from the online service to the offline
 * signer (a request, sealed by the service's export key) and back (a
 * response carrying Canton signatures). Versioned (`format`), strict (an
 * unknown member is refused, so nothing unchecked rides along), and
 * described by JSON Schemas generated from these zod schemas
 * (docs/air-gap-request.schema.json, docs/air-gap-response.schema.json).
 *
 * Nothing in transit is trusted:
 * - the request's `digest` is SHA-256 over a domain tag and the canonical
 *   JSON of the request (sorted keys, no whitespace; src/store/canonical.ts);
 *   the export key signs that digest, and the offline side checks the
 *   signature against an export key it was told to trust before it looks at
 *   anything else. It then re-derives every hash from the bytes itself.
 * - the response names the request by digest and nonce; its Canton
 *   signatures are checked on the online side against the party's registered
 *   key over the exact hashes the export asked for, and each nonce is
 *   accepted once.
 *
 * Two kinds of request:
 * - `prepared-transaction`: one PreparedTransaction (base64) with the scheme
 *   it was hashed with, the participant's claimed hash and the Intent it
 *   must fulfil; one signature over the transaction hash comes back.
 * - `topology-transactions`: the onboarding topology transactions of an
 *   external party with what they must establish; the validator path signs
 *   each transaction's hash, the Ledger API path the multi-hash of all.
 */
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { fingerprint, multiHash, topologyTransactionHash } from '../hashing/canton-hash.js';
import { base64ToBytes, bytesToHex } from '../hashing/input.js';
import { IntentSchema } from '../intent/model.js';
import { SCHEMES, verifySignature } from '../keys/schemes.js';
import type { CantonSignature, Signer } from '../keys/signer.js';
import { canonicalJson } from '../store/canonical.js';

import { REQUEST_FORMAT, RESPONSE_FORMAT } from './format-names.js';

export { REQUEST_FORMAT, RESPONSE_FORMAT };

/** Prefixed to the canonical JSON before hashing, so a digest of ours is never another protocol's. */
const REQUEST_DOMAIN = 'canton-signer air-gap request v1\n';

/** Why a payload was refused; `field` names the offending member (`request.intent.amount`). */
export type AirGapErrorCode =
  | 'malformed' // not JSON, or not our format / version, or a member is missing or wrong
  | 'untrusted_exporter' // sealed by an export key the offline side was not told to trust
  | 'export_signature_invalid' // the seal does not verify: the request changed in transit
  | 'digest_mismatch' // a response for another request, or the stated digest is not the request's
  | 'unknown_request' // the online side never exported a request with this nonce
  | 'nonce_replayed' // this response (nonce) was imported before
  | 'party_mismatch'
  | 'hash_mismatch' // the response signs other hashes than the request asked for
  | 'signature_invalid' // a Canton signature does not verify against the party's registered key
  | 'key_mismatch' // signed by another key than the party's registered one
  | 'window_closed' // too late to sign or to submit
  | 'window_too_short' // the window closes sooner than the configured minimum
  | 'refused' // the offline operator declined
  | 'export_key_missing'; // online: no export key was created yet (POST /v1/air-gap/export-key)

export class AirGapError extends Error {
  override readonly name = 'AirGapError';
  constructor(
    readonly code: AirGapErrorCode,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

const Hex = (bytes: number) =>
  z.string().regex(new RegExp(`^[0-9a-f]{${bytes * 2}}$`), `expected ${bytes} bytes as lowercase hex`);
const Base64 = z
  .string()
  .min(1)
  .regex(/^[A-Za-z0-9+/]+={0,2}$/, 'expected standard base64');
const Fingerprint = z.string().regex(/^1220[0-9a-f]{64}$/, 'expected a Canton fingerprint (1220 + 64 hex)');
const Iso = z.iso.datetime({ offset: true });
const Scheme = z.enum(Object.keys(SCHEMES) as [keyof typeof SCHEMES, ...(keyof typeof SCHEMES)[]]);

/** A Canton `Signature` in Ledger API JSON form. */
export const CantonSignatureSchema = z.strictObject({
  format: z.enum(['SIGNATURE_FORMAT_CONCAT', 'SIGNATURE_FORMAT_DER']),
  signature: Base64,
  signedBy: Fingerprint,
  signingAlgorithmSpec: z.enum([
    'SIGNING_ALGORITHM_SPEC_ED25519',
    'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256',
    'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_384',
  ]),
});

const PartyKey = z.strictObject({
  /** Fingerprint of the party's registered key: the only key whose signature is accepted. */
  fingerprint: Fingerprint,
  scheme: Scheme,
  /** SubjectPublicKeyInfo DER of the registered key, base64. */
  publicKey: Base64,
});

const Window = z.strictObject({
  earliest: Iso.optional(),
  latest: Iso,
  /**
   * What sets `latest` (e.g. `max_record_time`, `mining round 12 closes`, `preparation-time tolerance`):
   * a short name, shown to the offline operator, so letters, digits, spaces and `_ . : ? ( ) -` only.
   */
  latestSource: z
    .string()
    .regex(
      /^[A-Za-z0-9][A-Za-z0-9 _.:?()-]{0,119}$/,
      'a short name: 1-120 letters, digits, spaces or _ . : ? ( ) -, starting with a letter or digit',
    ),
});

const PreparedRequest = z.strictObject({
  format: z.literal(REQUEST_FORMAT),
  kind: z.literal('prepared-transaction'),
  /** The synchronizer the transaction is for (from its metadata). */
  synchronizerId: z.string().min(1),
  partyId: z.string().min(1),
  key: PartyKey,
  hashingScheme: z.enum(['v2', 'v3']),
  /** The PreparedTransaction exactly as it will be submitted, base64. */
  preparedTransaction: Base64,
  /** The hash the participant claimed, hex. */
  claimedHash: Hex(32),
  intent: IntentSchema,
  /** The command id the transaction carries (the ledger deduplicates on it). */
  commandId: z.string().min(1),
  window: Window,
  createdAt: Iso,
  nonce: Hex(32),
});

const TopologyExpectationJson = z.strictObject({
  participantUid: z.string().min(1),
  permission: z.enum(['submission', 'confirmation', 'observation']),
  threshold: z.number().int().min(1),
  path: z.enum(['validator', 'ledger-api']),
});

const TopologyRequest = z.strictObject({
  format: z.literal(REQUEST_FORMAT),
  kind: z.literal('topology-transactions'),
  synchronizerId: z.string().min(1),
  partyId: z.string().min(1),
  key: PartyKey,
  /** The serialized topology transactions exactly as they will be submitted, base64, in order. */
  transactions: z.array(Base64).min(1).max(16),
  /** The hashes to be signed, hex (34-byte multihashes): one per transaction (validator) or the multi-hash (Ledger API). */
  claimedHashes: z.array(Hex(34)).min(1).max(16),
  expect: TopologyExpectationJson,
  /** Onboarding has no ledger deadline; the service gives the request one. */
  window: Window,
  createdAt: Iso,
  nonce: Hex(32),
});

export const AirGapRequestSchema = z.discriminatedUnion('kind', [PreparedRequest, TopologyRequest]);
export type AirGapRequest = z.output<typeof AirGapRequestSchema>;
export type PreparedAirGapRequest = z.output<typeof PreparedRequest>;
export type TopologyAirGapRequest = z.output<typeof TopologyRequest>;

const ExportKey = z.strictObject({
  fingerprint: Fingerprint,
  scheme: Scheme,
  publicKey: Base64,
});

/** What is written to the file / QR frames: the request and the export key's seal over its digest. */
export const AirGapRequestEnvelopeSchema = z.strictObject({
  request: AirGapRequestSchema,
  /** Hex SHA-256 of the domain tag and the request's canonical JSON (recomputed by every reader). */
  digest: Hex(32),
  exportKey: ExportKey,
  exportSignature: CantonSignatureSchema,
});
export type AirGapRequestEnvelope = z.output<typeof AirGapRequestEnvelopeSchema>;

export const AirGapResponseSchema = z.strictObject({
  format: z.literal(RESPONSE_FORMAT),
  /** The request's digest and nonce: which export this answers. */
  requestDigest: Hex(32),
  nonce: Hex(32),
  partyId: z.string().min(1),
  /** The hashes signed (hex), in the request's order. */
  hashes: z
    .array(z.string().regex(/^[0-9a-f]{64}([0-9a-f]{4})?$/))
    .min(1)
    .max(16),
  /** One Canton signature per hash, same order. */
  signatures: z.array(CantonSignatureSchema).min(1).max(16),
  /** The fingerprint of the key that signed (the party's registered key). */
  signerFingerprint: Fingerprint,
  signedAt: Iso,
});
export type AirGapResponse = z.output<typeof AirGapResponseSchema>;

/** The digest a request is sealed and answered by. */
export function requestDigest(request: AirGapRequest): Uint8Array {
  return new Uint8Array(createHash('sha256').update(REQUEST_DOMAIN).update(canonicalJson(request)).digest());
}

/** A fresh 32-byte nonce, hex. */
export function newNonce(): string {
  return randomBytes(32).toString('hex');
}

/**
 * The hashes the offline key signs for `request`, recomputed from its bytes
 * (never taken from the request): for a prepared transaction the caller
 * supplies the recomputation (the pipeline decodes and hashes); for topology
 * each transaction's hash (validator path) or their multi-hash (Ledger API).
 */
export function topologyMessages(request: TopologyAirGapRequest): Uint8Array[] {
  const hashes = request.transactions.map((t) => topologyTransactionHash(base64ToBytes(t, 'transaction')));
  return request.expect.path === 'ledger-api' ? [multiHash(hashes)] : hashes;
}

function issuePath(issue: z.core.$ZodIssue, root: string): string {
  return [root, ...issue.path.map((p) => String(p))].join('.');
}

function parseJson(text: string | unknown, what: string): unknown {
  if (typeof text !== 'string') return text;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new AirGapError('malformed', `the ${what} is not JSON: ${(e as Error).message}`);
  }
}

function strictParse<T>(schema: z.ZodType<T>, value: unknown, root: string, what: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const i = r.error.issues[0]!;
  const field = issuePath(i, root);
  throw new AirGapError('malformed', `the ${what} is not a valid ${root}: ${field}: ${i.message}`, field);
}

/** Parses a request envelope (text or parsed JSON); refuses unknown versions and members, naming the field. */
/** `canton-signer/air-gap-request@…` or `…-response@…` at the top of `json` or in its `request`. */
function airGapKind(json: unknown): 'request' | 'response' | undefined {
  const o = (typeof json === 'object' && json !== null ? json : {}) as {
    format?: unknown;
    request?: { format?: unknown };
  };
  for (const f of [o.format, o.request?.format])
    if (typeof f === 'string') {
      if (f.startsWith('canton-signer/air-gap-request@')) return 'request';
      if (f.startsWith('canton-signer/air-gap-response@')) return 'response';
    }
  return undefined;
}

export function parseRequestEnvelope(input: string | unknown): AirGapRequestEnvelope {
  const json = parseJson(input, 'air-gap request');
  if (airGapKind(json) === 'response')
    throw new AirGapError(
      'malformed',
      "this is an air-gap response (the offline signer's answer), not a request: take it to the online machine and give it to `canton-signer import`; `offline verify` and `offline sign` read the request that `canton-signer export` wrote",
    );
  const format = (json as { request?: { format?: unknown } } | null)?.request?.format;
  if (
    typeof format === 'string' &&
    format !== REQUEST_FORMAT &&
    format.startsWith('canton-signer/air-gap-request@')
  )
    throw new AirGapError(
      'malformed',
      `request format ${format} is not supported here (this signer reads ${REQUEST_FORMAT}): use a matching canton-signer version`,
      'request.format',
    );
  return strictParse(AirGapRequestEnvelopeSchema, json, 'envelope', 'air-gap request');
}

export function parseResponse(input: string | unknown): AirGapResponse {
  const json = parseJson(input, 'air-gap response');
  if (airGapKind(json) === 'request')
    throw new AirGapError(
      'malformed',
      'this is an air-gap request (what `canton-signer export` wrote), not a response: sign it on the offline machine with `canton-signer offline sign`, then import the response it writes',
    );
  const format = (json as { format?: unknown } | null)?.format;
  if (
    typeof format === 'string' &&
    format !== RESPONSE_FORMAT &&
    format.startsWith('canton-signer/air-gap-response@')
  )
    throw new AirGapError(
      'malformed',
      `response format ${format} is not supported here (this service reads ${RESPONSE_FORMAT})`,
      'response.format',
    );
  const r = strictParse(AirGapResponseSchema, json, 'response', 'air-gap response');
  if (r.signatures.length !== r.hashes.length)
    throw new AirGapError(
      'malformed',
      `the response has ${r.hashes.length} hashes but ${r.signatures.length} signatures`,
      'response.signatures',
    );
  return r;
}

/** Seals `request` with the export key (through the signer contract). */
export async function sealRequest(
  request: AirGapRequest,
  signer: Signer,
  exportKeyLabel: string,
): Promise<AirGapRequestEnvelope> {
  const checked = strictParse(AirGapRequestSchema, request, 'request', 'air-gap request');
  const digest = requestDigest(checked);
  const out = await signer.sign(exportKeyLabel, digest);
  return {
    request: checked,
    digest: bytesToHex(digest),
    exportKey: {
      fingerprint: out.key.fingerprint,
      scheme: out.key.scheme,
      publicKey: Buffer.from(out.key.publicKeySpki).toString('base64'),
    },
    exportSignature: out.signature,
  };
}

/** An export key the offline side trusts: its SPKI (and so its fingerprint). */
export interface TrustedExportKey {
  fingerprint: string;
  scheme: keyof typeof SCHEMES;
  publicKeySpki: Uint8Array;
}

export function trustedExportKey(scheme: keyof typeof SCHEMES, spki: Uint8Array): TrustedExportKey {
  return { fingerprint: fingerprint(spki), scheme, publicKeySpki: spki };
}

/**
 * Checks the seal before anything else: the export key must be one the
 * reader trusts (by fingerprint and exact key), the stated digest must be the
 * recomputed one, and the signature must verify over it.
 */
export function openEnvelope(
  envelope: AirGapRequestEnvelope,
  trusted: readonly TrustedExportKey[],
): AirGapRequest {
  const k = envelope.exportKey;
  const t = trusted.find((x) => x.fingerprint === k.fingerprint);
  if (!t)
    throw new AirGapError(
      'untrusted_exporter',
      trusted.length === 0
        ? `the request is sealed by export key ${k.fingerprint}, and no export key is trusted here (give --trust)`
        : `the request is sealed by export key ${k.fingerprint}, which is not one of the ${trusted.length} trusted here`,
      'envelope.exportKey.fingerprint',
    );
  let spki: Uint8Array | undefined;
  try {
    spki = base64ToBytes(k.publicKey, 'export key');
  } catch {
    spki = undefined;
  }
  if (
    !spki ||
    t.scheme !== k.scheme ||
    Buffer.compare(Buffer.from(spki), Buffer.from(t.publicKeySpki)) !== 0 ||
    fingerprint(spki) !== t.fingerprint
  )
    throw new AirGapError(
      'untrusted_exporter',
      `the export key in the request claims fingerprint ${k.fingerprint} but is not the trusted key with that fingerprint`,
      'envelope.exportKey.publicKey',
    );
  if (envelope.exportSignature.signedBy !== t.fingerprint)
    throw new AirGapError(
      'export_signature_invalid',
      `the seal says it was made by ${envelope.exportSignature.signedBy}, not by the export key ${t.fingerprint}`,
      'envelope.exportSignature.signedBy',
    );
  // The seal's stated algorithm and format are the trusted key's: a relabelled seal is a changed seal.
  const info = SCHEMES[t.scheme];
  if (envelope.exportSignature.signingAlgorithmSpec !== info.algorithm)
    throw new AirGapError(
      'export_signature_invalid',
      `the seal names algorithm ${envelope.exportSignature.signingAlgorithmSpec}, but the export key signs with ${info.algorithm}`,
      'envelope.exportSignature.signingAlgorithmSpec',
    );
  if (envelope.exportSignature.format !== info.format)
    throw new AirGapError(
      'export_signature_invalid',
      `the seal names signature format ${envelope.exportSignature.format}, but the export key's signatures are ${info.format}`,
      'envelope.exportSignature.format',
    );
  const digest = requestDigest(envelope.request);
  if (bytesToHex(digest) !== envelope.digest)
    throw new AirGapError(
      'export_signature_invalid',
      'the request is not the one that was sealed: its digest differs from the stated one (changed in transit)',
      'envelope.digest',
    );
  let sig: Uint8Array;
  try {
    sig = base64ToBytes(envelope.exportSignature.signature, 'export signature');
  } catch {
    sig = new Uint8Array();
  }
  if (!verifySignature(t.scheme, t.publicKeySpki, digest, sig))
    throw new AirGapError(
      'export_signature_invalid',
      'the export signature does not verify over the request: the request or its seal changed in transit',
      'envelope.exportSignature.signature',
    );
  return envelope.request;
}

/** The response the offline signer writes for `envelope`, from the signatures it made. */
export function buildResponse(
  envelope: AirGapRequestEnvelope,
  hashes: readonly Uint8Array[],
  signatures: readonly CantonSignature[],
  signedAt: Date,
): AirGapResponse {
  const signer = signatures[0]?.signedBy;
  if (!signer) throw new AirGapError('malformed', 'a response needs at least one signature');
  if (signatures.length !== hashes.length)
    throw new AirGapError(
      'malformed',
      `a response needs one signature per hash: ${hashes.length} hashes, ${signatures.length} signatures`,
    );
  if (signatures.some((s) => s.signedBy !== signer))
    throw new AirGapError('key_mismatch', 'every signature of a response must be made by the same key');
  return {
    format: RESPONSE_FORMAT,
    requestDigest: envelope.digest,
    nonce: envelope.request.nonce,
    partyId: envelope.request.partyId,
    hashes: hashes.map(bytesToHex),
    signatures: [...signatures],
    signerFingerprint: signer,
    signedAt: signedAt.toISOString(),
  };
}

/** The JSON Schemas published in docs/ (a test keeps the files equal to these). */
export function airGapJsonSchemas(): { request: unknown; response: unknown } {
  const gen = (schema: z.ZodType, id: string, title: string) => ({
    ...(z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as object),
    $id: id,
    title,
  });
  return {
    request: gen(
      AirGapRequestEnvelopeSchema,
      'https://canton-signer.dev/schemas/air-gap-request-1.json',
      `${REQUEST_FORMAT}: a signing request sealed by the online service's export key`,
    ),
    response: gen(
      AirGapResponseSchema,
      'https://canton-signer.dev/schemas/air-gap-response-1.json',
      `${RESPONSE_FORMAT}: the offline signer's answer`,
    ),
  };
}
