/**
 * Shared fixtures for the intent tests: sandbox-builder inputs (parties, the
 * Amulet DSO context, holdings), real-vector loading, strict round trips, and
 * grafting extra nodes into a built transaction.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { encodePreparedTransaction } from '../../src/hashing/encode.js';
import type { DecodedTransaction, NodeBody, PreparedTransaction, Value } from '../../src/hashing/model.js';
import type { AmuletDso } from '../../src/sandbox/prepared/amulet-inputs.js';
import type { Envelope } from '../../src/sandbox/prepared/common.js';
import {
  preapprovalSend,
  setupProposalAccept,
  tokenStandardTransfer,
  transferInstructionAccept,
  transferInstructionReject,
  transferInstructionWithdraw,
  transferPreapprovalProposalCreate,
} from '../../src/sandbox/prepared/index.js';
import { VECTORS_DIR } from '../support/vectors.js';

const hex = (label: string, bytes = 32): string =>
  createHash('sha256')
    .update(label)
    .digest('hex')
    .repeat(3)
    .slice(0, bytes * 2);
export const partyOf = (hint: string): string => `${hint}::1220${hex(`party ${hint}`)}`;
/** An existing contract's id (138 hex digits, as in the vectors). */
export const existing = (label: string): string =>
  `00${hex(`cid ${label}`)}ca12${hex(`suffix ${label}`, 34)}`;

export const DSO = partyOf('DSO');
export const ALICE = partyOf('alice');
export const BOB = partyOf('bob');
export const CAROL = partyOf('carol');
export const VALIDATOR = `sandbox-validator-1::1220${hex('validator')}`;

export const T0 = 1_770_000_000_000_000n;
const seeds = (n: number): Uint8Array => createHash('sha256').update(`seed ${n}`).digest();

export const envelope = (actAs: string): Envelope => ({
  actAs: [actAs],
  commandId: 'sandbox-8d3f1c2e-4b5a-4c6d-8e7f-9a0b1c2d3e4f',
  synchronizerId: `global-domain::1220${hex('synchronizer')}`,
  transactionUuid: '3f2b8c1d-5e6a-4b7c-9d8e-0f1a2b3c4d5e',
  preparationTime: T0 + 1_000_000n,
  seeds,
});
export const bounds = { minLedgerEffectiveTime: T0, maxLedgerEffectiveTime: T0 + 86_400_000_000n };

export const dso: AmuletDso = {
  dso: DSO,
  amuletRules: { contractId: existing('rules'), createdAt: T0 - 10_000_000_000n },
  openRound: {
    contractId: existing('round'),
    createdAt: T0 - 600_000_000n,
    number: 21_416n,
    amuletPrice: '0.074418',
    opensAt: T0 - 1_000_000n,
    targetClosesAt: T0 + 1_200_000_000n,
  },
  holdingFeeRate: '0.0002556626',
};
export const externalPartyAmuletRules = {
  contractId: existing('external rules'),
  createdAt: T0 - 20_000_000_000n,
};

export const holding = (label: string, amount: string) => ({
  contractId: existing(label),
  createdAt: T0 - 5_000_000_000n,
  amount,
  createdRound: 21_000n,
  rate: '0.0001268393',
});

export const EXECUTE_BEFORE = T0 + 86_400_000_000n;
export const PREAPPROVAL_CID = existing('preapproval');

/** A token-standard Amulet transfer ALICE → receiver. */
export function buildTransfer(
  mode: 'direct' | 'twoStep',
  o: { amount?: string; receiver?: string; sender?: string; reason?: string; inputs?: string[] } = {},
): PreparedTransaction {
  const sender = o.sender ?? ALICE;
  const amount = o.amount ?? '7.25';
  return tokenStandardTransfer({
    ...envelope(sender),
    ...bounds,
    mode,
    dso,
    externalPartyAmuletRules,
    sender,
    receiver: o.receiver ?? BOB,
    amount,
    inputs: (o.inputs ?? ['1000']).map((a, i) => holding(`h${i}`, a)),
    requestedAt: T0,
    executeBefore: EXECUTE_BEFORE,
    reason: o.reason ?? 'invoice 42',
    preapproval:
      mode === 'direct'
        ? {
            contractId: PREAPPROVAL_CID,
            createdAt: T0 - 9_000_000_000n,
            provider: VALIDATOR,
            validFrom: T0 - 9_000_000_000n,
            lastRenewedAt: T0 - 9_000_000_000n,
            expiresAt: T0 + 7_000_000_000_000n,
          }
        : undefined,
  });
}

export const INSTRUCTION_CID = existing('instruction');
export const LOCKED_CID = existing('locked');
export const pendingTransfer = {
  sender: ALICE,
  receiver: BOB,
  amount: '12.5',
  admin: DSO,
  instrument: 'Amulet',
  requestedAt: T0 - 60_000_000n,
  executeBefore: T0 + 86_400_000_000n,
  inputHoldingCids: [LOCKED_CID],
  meta: {},
};
const instructionInput = (actAs: string) => ({
  ...envelope(actAs),
  dso,
  transfer: pendingTransfer,
  instruction: { contractId: INSTRUCTION_CID, createdAt: T0 - 60_000_000n },
  lockedAmulet: {
    contractId: LOCKED_CID,
    createdAt: T0 - 60_000_000n,
    createdRound: 21_400n,
    rate: '0.0001691191',
  },
});

export const buildAccept = () => transferInstructionAccept({ ...instructionInput(BOB), ...bounds });
export const buildReject = () => transferInstructionReject(instructionInput(BOB));
export const buildWithdraw = () => transferInstructionWithdraw(instructionInput(ALICE));

export const SEND_EXPIRES = T0 + 86_400_000_000n;
/** `description: null` leaves the description empty. */
export const buildPreapprovalSend = (nonce = 4n, description: string | null = 'rent') =>
  preapprovalSend({
    ...envelope(ALICE),
    dso: DSO,
    externalPartyAmuletRules,
    sender: ALICE,
    receiver: BOB,
    delegate: VALIDATOR,
    amount: '3.5',
    expiresAt: SEND_EXPIRES,
    nonce,
    description: description ?? undefined,
  });

export const SETUP_CID = existing('setup');
export const SETUP_EXPIRES = T0 + 7_776_000_000_000n;
export const buildSetupAccept = () =>
  setupProposalAccept({
    ...envelope(ALICE),
    dso: DSO,
    validator: VALIDATOR,
    user: ALICE,
    proposal: { contractId: SETUP_CID, createdAt: T0 - 1_000_000n, preapprovalExpiresAt: SETUP_EXPIRES },
    ledgerTime: T0,
  });

/** `expectedDso: null` leaves it empty. */
export const buildProposal = (expectedDso: string | null = DSO) =>
  transferPreapprovalProposalCreate({
    ...envelope(BOB),
    receiver: BOB,
    provider: VALIDATOR,
    expectedDso: expectedDso ?? undefined,
  });

/** Encodes and decodes strictly, as the pipeline sees a participant's answer. */
export function decoded(p: PreparedTransaction): DecodedTransaction {
  return decodePreparedTransaction(encodePreparedTransaction(p));
}

/** Adds `body` as the last child of node `parentId` (with a seed, as the participant gives one). */
export function graft(p: PreparedTransaction, parentId: string, body: NodeBody): PreparedTransaction {
  const id = String(Math.max(...p.transaction.nodes.map((n) => Number(n.nodeId))) + 1);
  const nodes = p.transaction.nodes.map((n) =>
    n.nodeId === parentId && n.node.type === 'exercise'
      ? { nodeId: n.nodeId, node: { ...n.node, children: [...n.node.children, id] } }
      : n,
  );
  nodes.push({ nodeId: id, node: body });
  return {
    ...p,
    transaction: {
      ...p.transaction,
      nodes,
      nodeSeeds: [...p.transaction.nodeSeeds, { nodeId: Number(id), seed: seeds(1000 + Number(id)) }],
    },
  };
}

// ---- real vectors ---------------------------------------------------------------------------------

export const REAL_DIR = join(VECTORS_DIR, 'real');
export const realFiles: string[] = readdirSync(REAL_DIR)
  .filter((f) => f.endsWith('.json'))
  .sort();

export function realVector(file: string): DecodedTransaction {
  const j = JSON.parse(readFileSync(join(REAL_DIR, file), 'utf8')) as { prepared_transaction_base64: string };
  return decodePreparedTransaction(j.prepared_transaction_base64);
}

// ---- editing transactions for the refusal tests -----------------------------------------------------

export const MALLORY = partyOf('mallory');

/** A decoded transaction as a model to edit and re-encode. */
export const modelOf = (tx: DecodedTransaction): PreparedTransaction => ({
  transaction: tx.transaction,
  metadata: tx.metadata,
});

/** The first node of `p` that `match` accepts (by execution order of ids). */
export function findNode<T extends NodeBody>(
  p: PreparedTransaction,
  match: (n: NodeBody) => n is T,
): { nodeId: string; node: T } {
  const hit = p.transaction.nodes.find((n) => match(n.node));
  if (!hit) throw new Error('no such node');
  return hit as { nodeId: string; node: T };
}

export const createOf =
  (entity: string) =>
  (n: NodeBody): n is NodeBody & { type: 'create' } =>
    n.type === 'create' && n.templateId.entityName === entity;

/** Replaces node `nodeId`'s body with `f(body)`. */
export function editNode(
  p: PreparedTransaction,
  nodeId: string,
  f: (n: NodeBody) => NodeBody,
): PreparedTransaction {
  const nodes = p.transaction.nodes.map((n) => (n.nodeId === nodeId ? { nodeId, node: f(n.node) } : n));
  return { ...p, transaction: { ...p.transaction, nodes } };
}

/** `v` with every value `f` maps replaced (depth first). */
export function mapValue(v: Value, f: (v: Value) => Value | undefined): Value {
  const r = f(v);
  if (r) return r;
  switch (v.kind) {
    case 'record':
      return { ...v, fields: v.fields.map((x) => ({ label: x.label, value: mapValue(x.value, f) })) };
    case 'optional':
      return v.value === undefined ? v : { kind: 'optional', value: mapValue(v.value, f) };
    case 'list':
      return { kind: 'list', elements: v.elements.map((e) => mapValue(e, f)) };
    case 'variant':
      return { ...v, value: mapValue(v.value, f) };
    case 'textMap':
      return {
        kind: 'textMap',
        entries: v.entries.map((e) => ({ key: e.key, value: mapValue(e.value, f) })),
      };
    default:
      return v;
  }
}

/** `v` with party `from` replaced by `to` everywhere. */
export const swapParty = (v: Value, from: string, to: string): Value =>
  mapValue(v, (x) => (x.kind === 'party' && x.value === from ? { kind: 'party', value: to } : undefined));

/** A record field set to `value` (added when missing), at the top level of `v`. */
export function setField(v: Value, label: string, value: Value): Value {
  if (v.kind !== 'record') return v;
  const has = v.fields.some((f) => f.label === label);
  return {
    ...v,
    fields: has
      ? v.fields.map((f) => (f.label === label ? { label, value } : f))
      : [...v.fields, { label, value }],
  };
}
