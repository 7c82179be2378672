/**
 * Small, valid PreparedTransaction models for tests, plus the refusal
 * assertion every negative test uses. Models are plain data: change a field,
 * encode with `encode`, and hand the bytes to the decoder/hasher.
 */
import { expect } from 'vitest';
import { encodePreparedTransaction } from '../../src/hashing/encode.js';
import { type RefusalCode, TransactionError } from '../../src/hashing/errors.js';
import type {
  CreateNode,
  ExerciseNode,
  FetchNode,
  Identifier,
  InputContract,
  Metadata,
  PreparedTransaction,
  Value,
} from '../../src/hashing/model.js';
import {
  be32,
  createEncoding,
  finalHash,
  metadataHash,
  type Scheme,
  type SpecMetadata,
  sha256,
  str,
  transactionHash,
  u8,
} from './spec-hash.js';

export const ALICE = `alice::1220${'a'.repeat(64)}`;
export const BOB = `bob::1220${'b'.repeat(64)}`;
export const CAROL = `carol::1220${'c'.repeat(64)}`;
export const SYNCHRONIZER = `global-domain::1220${'e'.repeat(64)}`;
export const UUID = '2f1c6a52-7d0e-4b8a-9c3f-5e6d7a8b9c0d';
export const PACKAGE_NAME = 'splice-amulet';
export const TEMPLATE: Identifier = {
  packageId: 'd'.repeat(64),
  moduleName: 'Splice.Amulet',
  entityName: 'Amulet',
};
export const PREPARATION_TIME = 1_750_000_000_000_000n;
export const MAX_LET = 1_750_000_100_000_000n;
export const MAX_RECORD_TIME = 1_750_000_200_000_000n;

/** A V1 contract id (0x00 ‖ 32-byte discriminator), lowercase hex, ordered by `n`. */
export function cid(n: number): string {
  return `00${n.toString(16).padStart(64, '0')}`;
}

export function seed(fill: number, length = 32): Uint8Array {
  return new Uint8Array(length).fill(fill);
}

export const text = (value: string): Value => ({ kind: 'text', value });
export const party = (value: string): Value => ({ kind: 'party', value });
export const numeric = (value: string): Value => ({ kind: 'numeric', value });
export const unit: Value = { kind: 'unit' };

export function record(fields: [string, Value][]): Value {
  return { kind: 'record', recordId: undefined, fields: fields.map(([label, value]) => ({ label, value })) };
}

export function createNode(contractId: string, argument: Value, over: Partial<CreateNode> = {}): CreateNode {
  return {
    type: 'create',
    lfVersion: '2.1',
    contractId,
    packageName: PACKAGE_NAME,
    templateId: { ...TEMPLATE },
    argument,
    signatories: [ALICE],
    stakeholders: [ALICE, BOB],
    key: undefined,
    ...over,
  };
}

export function exerciseNode(children: string[], over: Partial<ExerciseNode> = {}): ExerciseNode {
  return {
    type: 'exercise',
    lfVersion: '2.1',
    contractId: cid(1),
    packageName: PACKAGE_NAME,
    templateId: { ...TEMPLATE },
    signatories: [ALICE],
    stakeholders: [ALICE, BOB],
    actingParties: [ALICE],
    interfaceId: undefined,
    choiceId: 'Transfer',
    chosenValue: record([
      ['amount', numeric('10.0')],
      ['memo', text('hi')],
    ]),
    consuming: true,
    children,
    exerciseResult: { kind: 'contractId', value: cid(100) },
    choiceObservers: [],
    key: undefined,
    byKey: false,
    ...over,
  };
}

export function fetchNode(over: Partial<FetchNode> = {}): FetchNode {
  return {
    type: 'fetch',
    lfVersion: '2.1',
    contractId: cid(2),
    packageName: PACKAGE_NAME,
    templateId: { ...TEMPLATE },
    signatories: [ALICE],
    stakeholders: [ALICE, BOB],
    actingParties: [ALICE],
    interfaceId: undefined,
    key: undefined,
    byKey: false,
    ...over,
  };
}

export function inputContract(n: number): InputContract {
  return {
    contract: createNode(
      cid(n),
      record([
        ['owner', party(ALICE)],
        ['amount', numeric('100.0000000000')],
      ]),
    ),
    createdAt: PREPARATION_TIME - BigInt(n) * 1_000_000n,
    eventBlob: Uint8Array.from([0xca, 0xfe, n]),
  };
}

export function baseMetadata(): Metadata {
  return {
    submitterInfo: { actAs: [ALICE], commandId: 'command-1' },
    synchronizerId: SYNCHRONIZER,
    mediatorGroup: 0,
    transactionUuid: UUID,
    preparationTime: PREPARATION_TIME,
    inputContracts: [inputContract(1), inputContract(2)],
    minLedgerEffectiveTime: undefined,
    maxLedgerEffectiveTime: MAX_LET,
    maxRecordTime: MAX_RECORD_TIME,
  };
}

/** Index of each node of `baseModel` in `transaction.nodes`. */
export const EXERCISE = 0;
export const CREATE = 1;
export const FETCH = 2;

/**
 * A valid transaction: root exercise `0` on input contract cid(1) with children
 * create `1` and fetch `2` (of input contract cid(2)); seeds for `0` and `1`.
 */
export function baseModel(): PreparedTransaction {
  return {
    transaction: {
      version: '2.1',
      roots: ['0'],
      nodes: [
        { nodeId: '0', node: exerciseNode(['1', '2']) },
        {
          nodeId: '1',
          node: createNode(
            cid(100),
            record([
              ['owner', party(BOB)],
              ['amount', numeric('10.0')],
              [
                'meta',
                {
                  kind: 'textMap',
                  entries: [
                    { key: 'a', value: text('x') },
                    { key: 'b', value: text('y') },
                  ],
                },
              ],
            ]),
          ),
        },
        { nodeId: '2', node: fetchNode() },
      ],
      nodeSeeds: [
        { nodeId: 0, seed: seed(0xa0) },
        { nodeId: 1, seed: seed(0xa1) },
      ],
    },
    metadata: baseMetadata(),
  };
}

export function exerciseOf(m: PreparedTransaction, index = EXERCISE): ExerciseNode {
  const n = m.transaction.nodes[index]!.node;
  if (n.type !== 'exercise') throw new Error(`node ${index} is a ${n.type}`);
  return n;
}

export function createOf(m: PreparedTransaction, index = CREATE): CreateNode {
  const n = m.transaction.nodes[index]!.node;
  if (n.type !== 'create') throw new Error(`node ${index} is a ${n.type}`);
  return n;
}

export function fetchOf(m: PreparedTransaction, index = FETCH): FetchNode {
  const n = m.transaction.nodes[index]!.node;
  if (n.type !== 'fetch') throw new Error(`node ${index} is a ${n.type}`);
  return n;
}

export const encode = (m: PreparedTransaction): Uint8Array => encodePreparedTransaction(m);

// ---- one-create transactions with an independently computed hash -----------

const SINGLE_SEED = seed(0x5e);
const SINGLE_CID = cid(0xabc);
const SINGLE_INPUT_CID = cid(0x1);
const SINGLE_INPUT_CREATED_AT = 1_700_000_000_000_000n;

/** A transaction whose only node is a root create `0` with the given argument. */
export function singleCreateModel(argument: Value): PreparedTransaction {
  return {
    transaction: {
      version: '2.1',
      roots: ['0'],
      nodes: [{ nodeId: '0', node: createNode(SINGLE_CID, argument) }],
      nodeSeeds: [{ nodeId: 0, seed: SINGLE_SEED }],
    },
    metadata: {
      ...baseMetadata(),
      inputContracts: [
        {
          contract: createNode(SINGLE_INPUT_CID, record([['owner', party(ALICE)]])),
          createdAt: SINGLE_INPUT_CREATED_AT,
          eventBlob: new Uint8Array(0),
        },
      ],
    },
  };
}

/**
 * The hash of `singleCreateModel(v)` computed by hand from the spec, given the
 * value encoding of `v` (hashing-spec §4, §5, §6, §7, §8); `root` gives the
 * root create another template id or package name (the input contract keeps its own).
 */
export function singleCreateExpectedHash(
  scheme: Scheme,
  argumentEncoding: Uint8Array,
  root: { templateId?: Identifier; packageName?: string } = {},
): Buffer {
  const node = createEncoding(scheme, {
    lfVersion: '2.1',
    seed: SINGLE_SEED,
    contractId: SINGLE_CID,
    packageName: root.packageName ?? PACKAGE_NAME,
    templateId: root.templateId ?? TEMPLATE,
    argument: argumentEncoding,
    signatories: [ALICE],
    stakeholders: [ALICE, BOB],
  });
  // record { owner = Party ALICE }: tag 0c, no record id, 1 field, label present, party tag 06
  const inputArgument = Buffer.concat([u8(0x0c), u8(0), be32(1), u8(1), str('owner'), u8(0x06), str(ALICE)]);
  const input = createEncoding(scheme, {
    lfVersion: '2.1',
    seed: undefined,
    contractId: SINGLE_INPUT_CID,
    packageName: PACKAGE_NAME,
    templateId: TEMPLATE,
    argument: inputArgument,
    signatories: [ALICE],
    stakeholders: [ALICE, BOB],
  });
  const meta: SpecMetadata = {
    actAs: [ALICE],
    commandId: 'command-1',
    transactionUuid: UUID,
    mediatorGroup: 0,
    synchronizerId: SYNCHRONIZER,
    minLet: undefined,
    maxLet: MAX_LET,
    preparationTime: PREPARATION_TIME,
    inputs: [{ createdAt: SINGLE_INPUT_CREATED_AT, createHash: sha256(input) }],
    maxRecordTime: MAX_RECORD_TIME,
  };
  return finalHash(scheme, transactionHash('2.1', [sha256(node)]), metadataHash(scheme, meta));
}

// ---- refusals ---------------------------------------------------------------

/** Runs `fn`, which must throw a TransactionError (and so produce no hash); returns the error. */
export function refusal(fn: () => unknown): TransactionError {
  let returned: unknown;
  try {
    returned = fn();
  } catch (e) {
    if (e instanceof TransactionError) return e;
    throw e;
  }
  const shown = returned instanceof Uint8Array ? Buffer.from(returned).toString('hex') : typeof returned;
  throw new Error(`expected a refusal (TransactionError), but the call returned ${shown}`);
}

/** Asserts `fn` is refused with exactly this code and path. */
export function expectRefusal(fn: () => unknown, code: RefusalCode, path: string): TransactionError {
  const e = refusal(fn);
  expect({ code: e.code, path: e.path }, e.message).toEqual({ code, path });
  return e;
}
