/**
 * Workloads of the hashing benchmark, built with the project's own encoder:
 * the real vectors, AmuletRules_Transfer-like transactions of any node count
 * (an exercise root whose children create Amulet contracts), and a
 * transaction holding one large text.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const sha256 = (data) => createHash('sha256').update(data).digest();

// ---- inputs -------------------------------------------------------------------

export function loadRealVectors() {
  const dir =
    process.env.VECTORS_DIR ??
    (process.env.CANTON_VECTORS_DIR ? `${process.env.CANTON_VECTORS_DIR}/real/` : undefined) ??
    fileURLToPath(new URL('../../shared/vectors/real/', import.meta.url));
  if (!existsSync(dir)) throw new Error(`real vectors not found in ${dir} (set VECTORS_DIR)`);
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => {
      const j = JSON.parse(readFileSync(`${dir}/${f}`, 'utf8'));
      const b64 = j.prepared_transaction_base64;
      return {
        name: f,
        b64,
        bytes: new Uint8Array(Buffer.from(b64, 'base64')),
        expected: j.expected_hash_hex,
        expectedV3: j.reference_v3_hex,
      };
    });
}

/** Deterministic hex of `n` bytes derived from a label. */
function hexOf(label, n = 32) {
  let out = '';
  for (let i = 0; out.length < 2 * n; i++) out += sha256(`${label}/${i}`).toString('hex');
  return out.slice(0, 2 * n);
}
const bytesOf = (label) => new Uint8Array(sha256(label));
const cid = (label) => `00${hexOf(`cid:${label}`)}ca111220${hexOf(`cid-suffix:${label}`)}`;
const party = (hint) => `${hint}::1220${hexOf(`party:${hint}`)}`;
const sortedSet = (xs) => [...new Set(xs)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

const AMULET_PKG = hexOf('pkg:splice-amulet');
const id = (moduleName, entityName) => ({ packageId: AMULET_PKG, moduleName, entityName });
const rec = (recordId, fields) => ({
  kind: 'record',
  recordId,
  fields: Object.entries(fields).map(([label, value]) => ({ label, value })),
});
const P = (value) => ({ kind: 'party', value });
const N = (value) => ({ kind: 'numeric', value });
const I = (value) => ({ kind: 'int64', value: BigInt(value) });
const T = (value) => ({ kind: 'text', value });
const C = (value) => ({ kind: 'contractId', value });
const AMULET = id('Splice.Amulet', 'Amulet');
const DSO = party('DSO');
const SENDER = party('sender');
const OWNERS = Array.from({ length: 40 }, (_, i) => party(`owner-${i}`));

function amuletArgument(owner, i) {
  return rec(AMULET, {
    dso: P(DSO),
    owner: P(owner),
    amount: rec(id('Splice.Fees', 'ExpiringAmount'), {
      initialAmount: N(`${100 + (i % 900)}.${String((i * 7919) % 1e10).padStart(10, '0')}`),
      createdAt: rec(id('Splice.Types', 'Round'), { number: I(71_000 + i) }),
      ratePerRound: rec(id('Splice.Fees', 'RatePerRound'), { rate: N('0.0000190259') }),
    }),
  });
}

function amuletCreate(owner, i, contractId) {
  return {
    type: 'create',
    lfVersion: '2.1',
    contractId,
    packageName: 'splice-amulet',
    templateId: AMULET,
    argument: amuletArgument(owner, i),
    signatories: sortedSet([DSO, owner]),
    stakeholders: sortedSet([DSO, owner]),
    key: undefined,
  };
}

function metadata(inputs) {
  return {
    submitterInfo: { actAs: [SENDER], commandId: 'bench-0f7e2c1a-5b7d-4d8e-9f10-123456789abc' },
    synchronizerId: `global-domain::1220${hexOf('sync')}`,
    mediatorGroup: 0,
    transactionUuid: '3f2504e0-4f89-41d3-9a0c-0305e82c3301',
    preparationTime: 1_770_192_033_708_533n,
    inputContracts: inputs,
    minLedgerEffectiveTime: 1_770_192_032_658_000n,
    maxLedgerEffectiveTime: 1_770_195_632_657_999n,
    maxRecordTime: undefined,
  };
}

/** An AmuletRules_Transfer-like exercise root with `nodes - 1` Amulet create children. */
export function transferTransaction(nodeCount = 1000) {
  const children = nodeCount - 1;
  const nodes = [];
  const nodeSeeds = [];
  const createdIds = [];
  for (let i = 1; i <= children; i++) {
    const contractId = cid(`out:${i}`);
    createdIds.push(contractId);
    nodes.push({ nodeId: String(i), node: amuletCreate(OWNERS[i % OWNERS.length], i, contractId) });
    nodeSeeds.push({ nodeId: i, seed: bytesOf(`seed:${i}`) });
  }
  const inputCids = [cid('in:0'), cid('in:1'), cid('in:2')].sort();
  const transfer = rec(id('Splice.AmuletRules', 'Transfer'), {
    sender: P(SENDER),
    provider: P(SENDER),
    inputs: {
      kind: 'list',
      elements: inputCids.map((c) => ({
        kind: 'variant',
        variantId: id('Splice.AmuletRules', 'TransferInput'),
        constructor: 'InputAmulet',
        value: C(c),
      })),
    },
    outputs: {
      kind: 'list',
      elements: OWNERS.slice(0, 10).map((o, k) =>
        rec(id('Splice.AmuletRules', 'TransferOutput'), {
          receiver: P(o),
          receiverFeeRatio: N('0.0000000000'),
          amount: N(`${10 + k}.0000000000`),
          lock: { kind: 'optional', value: undefined },
        }),
      ),
    },
    beneficiaries: { kind: 'optional', value: undefined },
  });
  const root = {
    type: 'exercise',
    lfVersion: '2.1',
    contractId: cid('amulet-rules'),
    packageName: 'splice-amulet',
    templateId: id('Splice.AmuletRules', 'AmuletRules'),
    signatories: [DSO],
    stakeholders: [DSO],
    actingParties: [SENDER],
    interfaceId: undefined,
    choiceId: 'AmuletRules_Transfer',
    chosenValue: rec(id('Splice.AmuletRules', 'AmuletRules_Transfer'), {
      transfer,
      context: rec(id('Splice.AmuletRules', 'TransferContext'), {
        openMiningRound: C(cid('open-round')),
        issuingMiningRounds: { kind: 'textMap', entries: [] },
        validatorRights: { kind: 'textMap', entries: [] },
        featuredAppRight: { kind: 'optional', value: undefined },
      }),
      expectedDso: { kind: 'optional', value: P(DSO) },
    }),
    consuming: false,
    children: createdIds.map((_, k) => String(k + 1)),
    exerciseResult: rec(id('Splice.AmuletRules', 'TransferResult'), {
      round: rec(id('Splice.Types', 'Round'), { number: I(71_000) }),
      createdAmulets: {
        kind: 'list',
        elements: createdIds.map((c) => ({
          kind: 'variant',
          variantId: id('Splice.AmuletRules', 'CreatedAmulet'),
          constructor: 'TransferResultAmulet',
          value: C(c),
        })),
      },
      meta: { kind: 'optional', value: T('bench') },
    }),
    choiceObservers: [],
    key: undefined,
    byKey: false,
  };
  nodes.unshift({ nodeId: '0', node: root });
  nodeSeeds.unshift({ nodeId: 0, seed: bytesOf('seed:0') });
  const inputs = inputCids.map((c, k) => ({
    contract: amuletCreate(SENDER, 5000 + k, c),
    createdAt: 1_770_191_713_887_843n + BigInt(k),
    eventBlob: bytesOf(`blob:${k}`),
  }));
  return {
    transaction: { version: '2.1', roots: ['0'], nodes, nodeSeeds },
    metadata: metadata(inputs),
  };
}

/** One create whose argument is a record holding a text of `size` ASCII bytes. */
export function bigTextTransaction(size) {
  const text = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '
    .repeat(Math.ceil(size / 57))
    .slice(0, size);
  const node = amuletCreate(SENDER, 1, cid('big'));
  node.argument = rec(id('Splice.Bench', 'Blob'), { owner: P(SENDER), payload: T(text) });
  return {
    transaction: {
      version: '2.1',
      roots: ['0'],
      nodes: [{ nodeId: '0', node }],
      nodeSeeds: [{ nodeId: 0, seed: bytesOf('seed:big') }],
    },
    metadata: metadata([]),
  };
}
