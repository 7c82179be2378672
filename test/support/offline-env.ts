/**
 * Air-gap requests for the offline tests, made the way the online service
 * makes them: a real preparation from the sandbox participant (a
 * TransferPreapprovalProposal, checked by the pipeline for its window), or
 * the onboarding topology the sandbox's validator / Ledger API generates;
 * sealed with an export key through the signer contract. Also small helpers
 * to tamper with an envelope (`leafPaths`, `mutateAt`, `reseal`) and the
 * "no network" preload for the CLI tests (`NO_NETWORK_PRELOAD`).
 */
import { randomUUID } from 'node:crypto';
import type { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import type { ValidatorClient } from '../../src/canton/validator/client.js';
import { type SigningParty, verifyPrepared } from '../../src/flows/pipeline.js';
import { describeWindow } from '../../src/flows/window.js';
import { base64ToBytes, bytesToBase64, bytesToHex } from '../../src/hashing/input.js';
import type { Intent } from '../../src/intent/model.js';
import { participantUidOf } from '../../src/intent/topology.js';
import type { KeyDescription, Signer } from '../../src/keys/signer.js';
import {
  type AirGapRequest,
  type AirGapRequestEnvelope,
  newNonce,
  type PreparedAirGapRequest,
  REQUEST_FORMAT,
  sealRequest,
  type TopologyAirGapRequest,
} from '../../src/offline/format.js';
import { LEDGER_API_USER, type SandboxNetwork } from '../../src/sandbox/network.js';
import { preapprovalProposal } from './flow-env.js';

export const proposalIntent = (net: SandboxNetwork, p: SigningParty): Intent => ({
  kind: 'preapproval-proposal',
  receiver: p.partyId,
  provider: net.validatorParty,
});

/** A fresh preparation of a TransferPreapprovalProposal for `party`, as an air-gap request (not sealed). */
export async function preparedRequest(
  ledger: LedgerApiClient,
  net: SandboxNetwork,
  party: SigningParty,
  o: { commandId?: string; scheme?: 'v2' | 'v3' } = {},
): Promise<PreparedAirGapRequest> {
  const commandId = o.commandId ?? randomUUID();
  const res = await ledger.prepare({
    synchronizerId: net.synchronizerId,
    commands: [preapprovalProposal(net, party.partyId, net.validatorParty)],
    userId: LEDGER_API_USER,
    commandId,
    actAs: [party.partyId],
    ...(o.scheme === 'v3' ? { hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V3' as const } : {}),
  });
  const hashingScheme = res.hashingSchemeVersion === 'HASHING_SCHEME_VERSION_V3' ? 'v3' : 'v2';
  const intent = proposalIntent(net, party);
  // The online side checks before it exports; its window is what the request states.
  const v = verifyPrepared(
    'export',
    {
      preparedTransaction: res.preparedTransaction,
      claimedHash: res.preparedTransactionHash,
      scheme: hashingScheme,
    },
    party,
    intent,
    { commandId },
  );
  return {
    format: REQUEST_FORMAT,
    kind: 'prepared-transaction',
    synchronizerId: net.synchronizerId,
    partyId: party.partyId,
    key: { fingerprint: party.fingerprint, scheme: party.scheme, publicKey: party.publicKeySpki },
    hashingScheme,
    preparedTransaction: res.preparedTransaction,
    claimedHash: bytesToHex(base64ToBytes(res.preparedTransactionHash, 'hash')),
    intent,
    commandId,
    window: describeWindow(v.window),
    createdAt: new Date().toISOString(),
    nonce: newNonce(),
  };
}

const inAnHour = () => ({
  latest: new Date(Date.now() + 3_600_000).toISOString(),
  latestSource: 'onboarding request expiry',
});

/** The validator's onboarding topology for a new Ed25519 key (not yet a party), as an air-gap request. */
export async function validatorTopologyRequest(
  validator: ValidatorClient,
  ledger: LedgerApiClient,
  net: SandboxNetwork,
  key: KeyDescription,
  hint: string,
): Promise<TopologyAirGapRequest> {
  const gen = await validator.generateTopology({
    party_hint: hint,
    public_key: bytesToHex(key.publicKeyRaw),
  });
  return {
    format: REQUEST_FORMAT,
    kind: 'topology-transactions',
    synchronizerId: net.synchronizerId,
    partyId: gen.party_id,
    key: { fingerprint: key.fingerprint, scheme: key.scheme, publicKey: bytesToBase64(key.publicKeySpki) },
    transactions: gen.topology_txs.map((t) => t.topology_tx),
    claimedHashes: gen.topology_txs.map((t) => t.hash.toLowerCase()),
    expect: {
      participantUid: participantUidOf((await ledger.participantId()).participantId),
      permission: 'confirmation',
      threshold: 1,
      path: 'validator',
    },
    window: inAnHour(),
    createdAt: new Date().toISOString(),
    nonce: newNonce(),
  };
}

/** The participant's (Ledger API) onboarding topology for a new key, as an air-gap request. */
export async function ledgerTopologyRequest(
  ledger: LedgerApiClient,
  net: SandboxNetwork,
  key: KeyDescription,
  hint: string,
): Promise<TopologyAirGapRequest> {
  const gen = await ledger.generateExternalPartyTopology({
    synchronizer: net.synchronizerId,
    partyHint: hint,
    publicKey: {
      format: 'CRYPTO_KEY_FORMAT_DER_X509_SUBJECT_PUBLIC_KEY_INFO',
      keyData: bytesToBase64(key.publicKeySpki),
      keySpec: key.keySpec,
    },
  });
  return {
    format: REQUEST_FORMAT,
    kind: 'topology-transactions',
    synchronizerId: net.synchronizerId,
    partyId: gen.partyId,
    key: { fingerprint: key.fingerprint, scheme: key.scheme, publicKey: bytesToBase64(key.publicKeySpki) },
    transactions: gen.topologyTransactions,
    claimedHashes: [bytesToHex(base64ToBytes(gen.multiHash, 'multiHash'))],
    expect: {
      participantUid: participantUidOf((await ledger.participantId()).participantId),
      permission: 'confirmation',
      threshold: 1,
      path: 'ledger-api',
    },
    window: inAnHour(),
    createdAt: new Date().toISOString(),
    nonce: newNonce(),
  };
}

export const seal = (r: AirGapRequest, signer: Signer, label: string): Promise<AirGapRequestEnvelope> =>
  sealRequest(r, signer, label);

/** A JSON copy (what crosses the gap). */
export const copy = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/** Every leaf of a JSON value, as dotted paths (`request.intent.provider`, `request.transactions.0`). */
export function leafPaths(v: unknown, prefix: string[] = []): string[][] {
  if (v !== null && typeof v === 'object')
    return Object.entries(v as Record<string, unknown>).flatMap(([k, x]) => leafPaths(x, [...prefix, k]));
  return [prefix];
}

/** Other enum values the schema accepts, so a changed value still parses. */
const SWAPS: Record<string, string> = {
  v2: 'v3',
  v3: 'v2',
  ed25519: 'ecdsa-p256',
  'ecdsa-p256': 'ed25519',
  SIGNATURE_FORMAT_CONCAT: 'SIGNATURE_FORMAT_DER',
  SIGNATURE_FORMAT_DER: 'SIGNATURE_FORMAT_CONCAT',
  SIGNING_ALGORITHM_SPEC_ED25519: 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256',
  SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256: 'SIGNING_ALGORITHM_SPEC_ED25519',
  confirmation: 'submission',
  validator: 'ledger-api',
  'ledger-api': 'validator',
};

/** A changed value of the same kind that still parses (a flipped hex digit, base64 character, a later second…). */
export function changed(v: unknown): unknown {
  if (typeof v === 'number') return v + 1;
  if (typeof v === 'boolean') return !v;
  if (typeof v !== 'string') throw new Error(`cannot change ${typeof v}`);
  if (SWAPS[v]) return SWAPS[v];
  if (/^\d{4}-\d{2}-\d{2}T/.test(v)) return new Date(Date.parse(v) + 1000).toISOString();
  if (/^[0-9a-f]+$/.test(v) && v.length >= 32) {
    const i = Math.floor(v.length / 2);
    return v.slice(0, i) + (v[i] === '0' ? '1' : '0') + v.slice(i + 1);
  }
  if (/^[A-Za-z0-9+/]{8,}={0,2}$/.test(v)) {
    const i = Math.floor(v.replace(/=+$/, '').length / 2);
    return v.slice(0, i) + (v[i] === 'A' ? 'B' : 'A') + v.slice(i + 1);
  }
  return `${v}x`;
}

/** A copy of `v` with the leaf at `path` replaced by `f(old)`. */
export function mutateAt<T>(v: T, path: readonly string[], f: (old: unknown) => unknown = changed): T {
  const out = copy(v);
  let o = out as Record<string, unknown>;
  for (const k of path.slice(0, -1)) o = o[k] as Record<string, unknown>;
  const last = path[path.length - 1]!;
  o[last] = f(o[last]);
  return out;
}

/**
 * Writes into a module (ESM, for `node --import`) that replaces every way
 * to reach the network with a function that records the attempt (one JSON
 * line in $OFFLINE_NET_LOG) and throws.
 */
export const NO_NETWORK_PRELOAD = `
import { appendFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import net from 'node:net';
import tls from 'node:tls';
import dgram from 'node:dgram';
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
const log = process.env.OFFLINE_NET_LOG;
const block = (what) => function blocked() {
  if (log) appendFileSync(log, JSON.stringify({ what, args: [...arguments].map((a) => typeof a === 'object' ? '[object]' : String(a)) }) + '\\n');
  throw new Error('network access blocked in this test: ' + what);
};
net.Socket.prototype.connect = block('net.Socket.connect');
net.connect = block('net.connect');
net.createConnection = block('net.createConnection');
tls.connect = block('tls.connect');
dgram.createSocket = block('dgram.createSocket');
for (const k of ['lookup', 'lookupService', 'resolve', 'resolve4', 'resolve6', 'resolveAny', 'resolveSrv', 'resolveTxt', 'reverse'])
  dns[k] = block('dns.' + k);
for (const k of ['lookup', 'lookupService', 'resolve', 'resolve4', 'resolve6', 'resolveAny'])
  dns.promises[k] = block('dns.promises.' + k);
http.request = block('http.request');
http.get = block('http.get');
https.request = block('https.request');
https.get = block('https.get');
globalThis.fetch = block('fetch');
syncBuiltinESMExports();
`;

/** A script that tries each way out; with the preload, each attempt must be recorded. */
export const NETWORK_CONTROL_SCRIPT = `
import net from 'node:net';
import { connect } from 'node:net';
import dns from 'node:dns';
import http from 'node:http';
const tries = [
  () => net.connect(9, '127.0.0.1'),
  () => connect(9, '127.0.0.1'),
  () => new net.Socket().connect(9, '127.0.0.1'),
  () => dns.lookup('localhost', () => {}),
  () => http.get('http://127.0.0.1:9/'),
  () => fetch('http://127.0.0.1:9/'),
];
for (const t of tries) { try { const r = t(); if (r && r.catch) r.catch(() => {}); } catch {} }
`;
