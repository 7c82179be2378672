/**
 * Sandbox prepared-transaction builders (src/sandbox/prepared): every builder's
 * encoding decodes strictly, re-encodes to the same bytes and hashes under V2
 * and V3; its shape (node tree, root-argument label paths, input-contract
 * templates, metadata fields present) equals the shape of the real vector of
 * the same action; the inspect report highlights its amounts and parties.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { encodePreparedTransaction } from '../../src/hashing/encode.js';
import type { DecodedTransaction, Identifier, PreparedTransaction, Value } from '../../src/hashing/model.js';
import { templateName } from '../../src/hashing/render.js';
import { hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import { inspectTransaction } from '../../src/intent/inspect.js';
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

// ---- shape signature ------------------------------------------------------------

interface Shape {
  tree: string[];
  rootArgument: string[];
  /** Label paths of every node's argument (create) or chosen value and result (exercise), in tree order. */
  nodeValues: string[][];
  inputContracts: string[];
  metadata: string[];
}

const iface = (id: Identifier | undefined): string => (id ? ` via ${id.moduleName}:${id.entityName}` : '');

/** Label paths of a value: records by label, variants by constructor, text-map keys, lists collapsed. */
function labelPaths(v: Value, path: string, out: Set<string>): void {
  switch (v.kind) {
    case 'record':
      for (const f of v.fields) {
        const p = `${path}.${f.label}`;
        out.add(p);
        labelPaths(f.value, p, out);
      }
      return;
    case 'variant':
      labelPaths(v.value, `${path}<${v.constructor}>`, out);
      return;
    case 'optional':
      if (v.value) labelPaths(v.value, `${path}?`, out);
      return;
    case 'list':
      for (const e of v.elements) labelPaths(e, `${path}[]`, out);
      return;
    case 'textMap':
      for (const e of v.entries) {
        out.add(`${path}[${JSON.stringify(e.key)}]`);
        labelPaths(e.value, `${path}[${JSON.stringify(e.key)}]`, out);
      }
      return;
    default:
      out.add(`${path}:${v.kind}`);
  }
}

function shapeOf(tx: DecodedTransaction): Shape {
  const tree: string[] = [];
  const nodeValues: string[][] = [];
  const walk = (id: string, depth: number): void => {
    const n = tx.nodeById.get(id)!;
    const vals = new Set<string>();
    if (n.type === 'create') labelPaths(n.argument, '', vals);
    if (n.type === 'exercise') {
      labelPaths(n.chosenValue, 'arg', vals);
      if (n.exerciseResult) labelPaths(n.exerciseResult, 'result', vals);
    }
    nodeValues.push([...vals].sort());
    const indent = '  '.repeat(depth);
    if (n.type === 'rollback') tree.push(`${indent}rollback`);
    else if (n.type === 'exercise')
      tree.push(
        `${indent}exercise ${templateName(n.packageName, n.templateId)} ${n.choiceId}${iface(n.interfaceId)}`,
      );
    else if (n.type === 'fetch')
      tree.push(`${indent}fetch ${templateName(n.packageName, n.templateId)}${iface(n.interfaceId)}`);
    else tree.push(`${indent}${n.type} ${templateName(n.packageName, n.templateId)}`);
    if (n.type === 'exercise' || n.type === 'rollback') for (const c of n.children) walk(c, depth + 1);
  };
  for (const r of tx.transaction.roots) walk(r, 0);
  const root = tx.nodeById.get(tx.transaction.roots[0]!)!;
  const paths = new Set<string>();
  if (root.type === 'exercise') labelPaths(root.chosenValue, '', paths);
  else if (root.type === 'create') labelPaths(root.argument, '', paths);
  const m = tx.metadata;
  const metadata = ['actAs', 'commandId', 'synchronizerId', 'transactionUuid', 'preparationTime'];
  if (m.inputContracts.length > 0) metadata.push('inputContracts');
  if (m.minLedgerEffectiveTime !== undefined) metadata.push('minLedgerEffectiveTime');
  if (m.maxLedgerEffectiveTime !== undefined) metadata.push('maxLedgerEffectiveTime');
  if (m.maxRecordTime !== undefined) metadata.push('maxRecordTime');
  return {
    tree,
    nodeValues,
    rootArgument: [...paths].sort(),
    inputContracts: m.inputContracts
      .map((c) => templateName(c.contract.packageName, c.contract.templateId))
      .sort(),
    metadata,
  };
}

function vector(name: string): DecodedTransaction {
  const j = JSON.parse(readFileSync(join(VECTORS_DIR, 'real', `${name}.json`), 'utf8')) as {
    prepared_transaction_base64: string;
  };
  return decodePreparedTransaction(j.prepared_transaction_base64);
}

/** Encodes, decodes strictly (no test options), checks the round trip and both hashes. */
function roundTrip(model: PreparedTransaction): DecodedTransaction {
  const bytes = encodePreparedTransaction(model);
  const tx = decodePreparedTransaction(bytes);
  expect(Buffer.from(encodePreparedTransaction(tx)).equals(Buffer.from(bytes))).toBe(true);
  const v2 = hashPreparedTransaction(bytes, { scheme: 'v2' });
  const v3 = hashPreparedTransaction(bytes, { scheme: 'v3' });
  expect(v2).toHaveLength(32);
  expect(v3).toHaveLength(32);
  expect(Buffer.from(v2).equals(Buffer.from(v3))).toBe(false);
  return tx;
}

// ---- fixtures ----------------------------------------------------------------------

const hex = (label: string, bytes = 32): string =>
  createHash('sha256')
    .update(label)
    .digest('hex')
    .repeat(3)
    .slice(0, bytes * 2);
const partyOf = (hint: string): string => `${hint}::1220${hex(`party ${hint}`)}`;
/** An existing contract's id: `00`, 32-byte discriminator, 36-byte suffix (138 hex digits, as in the vectors). */
const existing = (label: string): string => `00${hex(`cid ${label}`)}ca12${hex(`suffix ${label}`, 34)}`;

const DSO = partyOf('DSO');
const ALICE = partyOf('alice');
const BOB = partyOf('bob');
const VALIDATOR = `sandbox-validator-1::1220${hex('validator')}`;

const T0 = 1_770_000_000_000_000n;
const seeds = (n: number): Uint8Array => createHash('sha256').update(`seed ${n}`).digest();

const envelope = (actAs: string): Envelope => ({
  actAs: [actAs],
  commandId: 'sandbox-8d3f1c2e-4b5a-4c6d-8e7f-9a0b1c2d3e4f',
  synchronizerId: `global-domain::1220${hex('synchronizer')}`,
  transactionUuid: '3f2b8c1d-5e6a-4b7c-9d8e-0f1a2b3c4d5e',
  preparationTime: T0 + 1_000_000n,
  seeds,
});
const bounds = { minLedgerEffectiveTime: T0, maxLedgerEffectiveTime: T0 + 86_400_000_000n };

const dso: AmuletDso = {
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
const externalPartyAmuletRules = { contractId: existing('external rules'), createdAt: T0 - 20_000_000_000n };

const holding = (label: string, amount: string) => ({
  contractId: existing(label),
  createdAt: T0 - 5_000_000_000n,
  amount,
  createdRound: 21_000n,
  rate: '0.0001268393',
});

const pendingTransfer = {
  sender: ALICE,
  receiver: BOB,
  amount: '12.5',
  admin: DSO,
  instrument: 'Amulet',
  requestedAt: T0 - 60_000_000n,
  executeBefore: T0 + 86_400_000_000n,
  inputHoldingCids: [existing('locked')],
  meta: {},
};
const instructionInput = (actAs: string) => ({
  ...envelope(actAs),
  dso,
  transfer: pendingTransfer,
  instruction: { contractId: existing('instruction'), createdAt: T0 - 60_000_000n },
  lockedAmulet: {
    contractId: existing('locked'),
    createdAt: T0 - 60_000_000n,
    createdRound: 21_400n,
    rate: '0.0001691191',
  },
});

interface Case {
  name: string;
  vectors: string[];
  build: () => PreparedTransaction;
  /** Highlights expected somewhere in the inspect report: kind, path, value. */
  expect: [string, string, string][];
}

const CASES: Case[] = [
  {
    name: 'transferPreapprovalProposalCreate',
    vectors: [
      'v2_splice_wallet_kernel_tx_visualizer_transfer_preapproval_proposal',
      'v2_bitgo_onesteppreapprovalprepareresponse',
      'v2_canton_network_wallet_signing_bitgo_transfer_preapproval_pv35',
    ],
    build: () =>
      transferPreapprovalProposalCreate({
        ...envelope(BOB),
        receiver: BOB,
        provider: VALIDATOR,
        expectedDso: DSO,
      }),
    expect: [
      ['party', 'receiver', BOB],
      ['party', 'provider', VALIDATOR],
    ],
  },
  {
    name: 'setupProposalAccept',
    vectors: ['v2_cordialsys_crosschain_live_create_account_accept'],
    build: () =>
      setupProposalAccept({
        ...envelope(ALICE),
        dso: DSO,
        validator: VALIDATOR,
        user: ALICE,
        proposal: {
          contractId: existing('setup'),
          createdAt: T0 - 1_000_000n,
          preapprovalExpiresAt: T0 + 7_776_000_000_000n,
        },
        ledgerTime: T0,
      }),
    expect: [
      ['party', 'user', ALICE],
      ['party', 'receiver', ALICE],
      ['party', 'provider', VALIDATOR],
    ],
  },
  {
    name: 'tokenStandardTransfer (direct, receiver has a TransferPreapproval)',
    vectors: ['v2_bitgo_transferrawtxnwithmemo_preparecommandresponse_base64_json'],
    build: () =>
      tokenStandardTransfer({
        ...envelope(ALICE),
        ...bounds,
        mode: 'direct',
        dso,
        externalPartyAmuletRules,
        sender: ALICE,
        receiver: BOB,
        amount: '7.25',
        inputs: [holding('h1', '10')],
        requestedAt: T0,
        executeBefore: T0 + 86_400_000_000n,
        reason: 'invoice 42',
        preapproval: {
          contractId: existing('preapproval'),
          createdAt: T0 - 9_000_000_000n,
          provider: VALIDATOR,
          validFrom: T0 - 9_000_000_000n,
          lastRenewedAt: T0 - 9_000_000_000n,
          expiresAt: T0 + 7_000_000_000_000n,
        },
      }),
    expect: [
      ['amount', 'transfer.amount', '7.2500000000'],
      ['party', 'transfer.receiver', BOB],
      ['party', 'transfer.sender', ALICE],
      ['amount', 'amount', '7.2500000000'],
    ],
  },
  {
    name: 'tokenStandardTransfer (two-step, creates an AmuletTransferInstruction)',
    vectors: ['v2_bitgo_trasferprepareresponse'],
    build: () =>
      tokenStandardTransfer({
        ...envelope(ALICE),
        ...bounds,
        mode: 'twoStep',
        dso,
        externalPartyAmuletRules,
        sender: ALICE,
        receiver: BOB,
        amount: '15',
        inputs: [holding('h1', '10'), holding('h2', '10')],
        requestedAt: T0,
        executeBefore: T0 + 86_400_000_000n,
        reason: '',
      }),
    expect: [
      ['amount', 'transfer.amount', '15.0000000000'],
      ['party', 'transfer.receiver', BOB],
      ['amount', 'outputs[0].amount', '15.0000000000'],
    ],
  },
  {
    name: 'transferInstructionAccept',
    vectors: ['v2_bitgo_transferacceptanceprepareresponse'],
    build: () => transferInstructionAccept({ ...instructionInput(BOB), ...bounds }),
    expect: [
      ['amount', 'transfer.amount', '12.5000000000'],
      ['party', 'transfer.receiver', BOB],
      ['party', 'transfer.outputs[0].receiver', BOB],
      ['amount', 'transfer.outputs[0].amount', '12.5000000000'],
    ],
  },
  {
    name: 'transferInstructionReject',
    vectors: ['v2_bitgo_transferrejectionprepareresponse'],
    build: () => transferInstructionReject(instructionInput(BOB)),
    expect: [
      ['amount', 'transfer.amount', '12.5000000000'],
      ['party', 'transfer.receiver', BOB],
    ],
  },
  {
    name: 'transferInstructionWithdraw',
    vectors: ['v2_bitgo_cantontransferofferwithdrawnprepareresponse'],
    build: () => transferInstructionWithdraw(instructionInput(ALICE)),
    expect: [
      ['amount', 'transfer.amount', '12.5000000000'],
      ['party', 'transfer.sender', ALICE],
      ['party', 'transfer.receiver', BOB],
    ],
  },
];

/** Every highlight of the report: nodes' and input contracts'. */
function allHighlights(tx: DecodedTransaction): [string, string, string][] {
  const r = inspectTransaction(tx);
  const hs = [
    ...r.transaction.nodes.flatMap((n) => n.highlights ?? []),
    ...r.metadata.inputContracts.flatMap((c) => c.highlights),
  ];
  return hs.map((h) => [
    h.kind,
    h.path,
    typeof h.value === 'string' ? h.value : `${h.value.id}@${h.value.admin}`,
  ]);
}

describe('sandbox prepared-transaction builders', () => {
  for (const c of CASES) {
    describe(c.name, () => {
      it('decodes strictly, round-trips and hashes under V2 and V3', () => {
        const tx = roundTrip(c.build());
        expect(tx.transaction.nodes.length).toBeGreaterThan(0);
      });

      for (const v of c.vectors)
        it(`has the shape of ${v}`, () => {
          const ours = shapeOf(roundTrip(c.build()));
          const theirs = shapeOf(vector(v));
          expect(ours.tree).toEqual(theirs.tree);
          expect(ours.rootArgument).toEqual(theirs.rootArgument);
          expect(ours.nodeValues).toEqual(theirs.nodeValues);
          expect(ours.inputContracts).toEqual(theirs.inputContracts);
          expect(ours.metadata).toEqual(theirs.metadata);
        });

      it('shows its amounts and parties as inspect highlights', () => {
        const hs = allHighlights(roundTrip(c.build()));
        for (const h of c.expect) expect(hs).toContainEqual(h);
      });
    });
  }

  describe('preapprovalSend (no real vector: documented shape only)', () => {
    const build = () =>
      preapprovalSend({
        ...envelope(ALICE),
        dso: DSO,
        externalPartyAmuletRules,
        sender: ALICE,
        receiver: BOB,
        delegate: VALIDATOR,
        amount: '3.5',
        expiresAt: T0 + 86_400_000_000n,
        nonce: 4n,
        description: 'rent',
      });

    it('decodes strictly, round-trips and hashes under V2 and V3', () => {
      const tx = roundTrip(build());
      expect({ ...shapeOf(tx), nodeValues: [] }).toEqual({
        nodeValues: [],
        tree: [
          'exercise splice-amulet:Splice.ExternalPartyAmuletRules:ExternalPartyAmuletRules ExternalPartyAmuletRules_CreateTransferCommand',
          '  create splice-amulet:Splice.ExternalPartyAmuletRules:TransferCommand',
        ],
        rootArgument: [
          '.amount',
          '.amount:numeric',
          '.delegate',
          '.delegate:party',
          '.description',
          '.description?:text',
          '.expectedDso',
          '.expectedDso?:party',
          '.expiresAt',
          '.expiresAt:timestamp',
          '.nonce',
          '.nonce:int64',
          '.receiver',
          '.receiver:party',
          '.sender',
          '.sender:party',
        ],
        inputContracts: ['splice-amulet:Splice.ExternalPartyAmuletRules:ExternalPartyAmuletRules'],
        metadata: [
          'actAs',
          'commandId',
          'synchronizerId',
          'transactionUuid',
          'preparationTime',
          'inputContracts',
        ],
      });
    });

    it('shows its amount and receiver as inspect highlights', () => {
      const hs = allHighlights(roundTrip(build()));
      expect(hs).toContainEqual(['amount', 'amount', '3.5000000000']);
      expect(hs).toContainEqual(['party', 'receiver', BOB]);
      expect(hs).toContainEqual(['party', 'delegate', VALIDATOR]);
    });
  });

  it('mints distinct created-contract ids from distinct seeds', () => {
    const tx = roundTrip(CASES[3]!.build());
    const created = tx.transaction.nodes.flatMap((n) =>
      n.node.type === 'create' ? [n.node.contractId] : [],
    );
    expect(created).toHaveLength(3);
    expect(new Set(created).size).toBe(3);
    for (const id of created) expect(id).toMatch(/^00[0-9a-f]{64}$/);
  });
});
