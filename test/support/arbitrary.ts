/**
 * fast-check arbitraries for VALID `PreparedTransaction` models (src/hashing/model.ts):
 * every generated model encodes (encodePreparedTransaction) to bytes the strict
 * decoder accepts, and decodes back to an equal model.
 *
 * What "valid" means here is what decode.ts / canonical.ts enforce:
 * - party sets (signatories, stakeholders, acting parties, choice observers,
 *   maintainers, act_as) strictly ascending by JS string order, no duplicates;
 *   act_as non-empty; parties match `[A-Za-z0-9:\-_ ]{1,255}`;
 * - input contracts strictly ascending by contract id;
 * - numerics canonical (`-?([1-9]\d*|0)\.\d*`, scale ≤ 37, precision ≤ 38, no -0);
 * - contract ids lowercase hex `00` ‖ 32-byte discriminator ‖ suffix ≤ 94 bytes;
 * - lowercase UUID; node ids canonical decimal int32;
 * - nodes form a forest: every node referenced exactly once (by the roots or one
 *   parent), 32-byte seeds for exactly the create and exercise nodes;
 * - non-empty record labels and variant/enum constructors; identifiers as Daml-LF
 *   defines them (package id 1-64 of `[A-Za-z0-9\-_ ]`, module and entity names
 *   dotted `[A-Za-z$_][A-Za-z0-9$_]*` segments), package names 1-255 of
 *   `[A-Za-z0-9\-_]`; required strings (package name, choice id) non-empty;
 * - text-map keys unique and ascending by UTF-8 bytes; value depth well below 100;
 * - LF "2.1" under V2; "2.1" or "2" plus contract keys, by-key actions and
 *   QueryByKey nodes only when `scheme: 'v3'`.
 *
 * The ordering rules are implemented here independently (plain JS `<` and
 * Buffer.compare over UTF-8), not imported from src/, so the tests do not trust
 * the code they test.
 */
import fc from 'fast-check';
import type {
  CreateNode,
  ExerciseNode,
  FetchNode,
  GlobalKeyWithMaintainers,
  Identifier,
  InputContract,
  Metadata,
  Node,
  NodeBody,
  NodeSeed,
  PreparedTransaction,
  QueryByKeyNode,
  Value,
} from '../../src/hashing/model.js';

export interface ArbOptions {
  /**
   * 'v2' (default): LF "2.1" only, no contract keys, no QueryByKey nodes.
   * 'v3': LF "2.1" or "2", contract keys on creates/exercises/fetches, by-key
   * actions and QueryByKey nodes (hashable only with scheme V3).
   */
  scheme?: 'v2' | 'v3';
  /** Range of `Value.int64`: 'full' (default) = the whole int64 range; 'safe' = ±(2^53 − 1). */
  int64?: 'full' | 'safe';
  /** Range of `Value.timestamp` (µs): 'full' (default) = the whole int64 range; 'safe' = ±(2^53 − 1). */
  timestamp?: 'full' | 'safe';
  /** Maximum nesting of generated values (default 4, at most 90; the decoder allows 100). */
  maxValueDepth?: number;
  /** Maximum nesting of exercise/rollback nodes (default 3). */
  maxTreeDepth?: number;
  /** Maximum number of roots and of children per exercise/rollback (default 4). */
  maxChildren?: number;
  /** Maximum number of input contracts in the metadata (default 3). */
  maxInputContracts?: number;
}

// ---- scalars -----------------------------------------------------------------

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const UINT64_MAX = 2n ** 64n - 1n;

const hexOf = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
const bytes = (min: number, max = min) => fc.uint8Array({ minLength: min, maxLength: max });
const hex = (n: number) => bytes(n).map(hexOf);

/** JS string order (UTF-16 code units), the decoder's order for party sets. */
const byJsString = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
/** UTF-8 byte order, the participant's order for text-map keys. */
const byUtf8 = (a: string, b: string): number =>
  Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

/** A 32-byte seed (node seeds, global-key hashes). */
export const arbSeed: fc.Arbitrary<Uint8Array> = bytes(32);

/** An int64 in the full range, with the edges and the 2^53 boundary emphasised. */
export function arbInt64(range: 'full' | 'safe' = 'full'): fc.Arbitrary<bigint> {
  const [min, max] = range === 'full' ? [INT64_MIN, INT64_MAX] : [-SAFE, SAFE];
  const edges =
    range === 'full' ? [INT64_MIN, INT64_MAX, SAFE + 1n, -SAFE - 2n, 0n, -1n] : [-SAFE, SAFE, 0n, -1n];
  return fc.oneof(
    { weight: 4, arbitrary: fc.bigInt({ min, max }) },
    { weight: 2, arbitrary: fc.bigInt({ min: -100_000n, max: 100_000n }) },
    { weight: 1, arbitrary: fc.constantFrom(...edges) },
  );
}

/** A uint64 (metadata times): mostly realistic µs since epoch, sometimes anywhere in 0..2^64−1. */
export const arbUint64: fc.Arbitrary<bigint> = fc.oneof(
  { weight: 3, arbitrary: fc.bigInt({ min: 1_600_000_000_000_000n, max: 2_000_000_000_000_000n }) },
  { weight: 1, arbitrary: fc.bigInt({ min: 0n, max: UINT64_MAX }) },
  { weight: 1, arbitrary: fc.constantFrom(0n, 2n ** 63n - 1n, 2n ** 63n, UINT64_MAX) },
);

/** Free text: printable ASCII, any Unicode scalar (astral planes included), and a few classics. */
export const arbText: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 12 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 6 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '',
      'Grüße aus Zürich',
      '日本語のテキスト',
      '🦄🚀 emoji',
      '\uFEFFstarts with a BOM',
      'nul\u0000inside',
      'e\u0301 (combining)',
      '\uFFFF\u{10FFFF}',
      'a'.repeat(300),
    ),
  },
);

const PARTY_CHARS = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789', ':', '-', '_', ' '];
const FIXED_PARTIES = [
  'alice::1220d2d732d042c281cee80f483ab80f3cbaa4782860ed5f4dc228ab03dedd2ee8f9',
  'bob::122092e7d33ac10c0f3d55976342f37555df05da5b742956d56a62ae2367769079d2',
  'DSO::1220be58c29e65de40bf273be1dc2b266d43a9a002ea5b18955aeef7aac881bb471a',
  'auth0_007c65f857f1c3d599cb6df73775::1220d2d732d042c281cee80f483ab80f3cbaa4782860ed5f4dc228ab03dedd2ee8f9',
];

/** A Daml party id: realistic `hint::1220<fingerprint>`, a fixed pool (so parties repeat), or any legal string. */
export const arbParty: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...FIXED_PARTIES) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.string({ unit: fc.constantFrom(...PARTY_CHARS.slice(0, 62), '-', '_'), minLength: 1 }),
        hex(32),
      )
      .map(([hint, fp]) => `${hint}::1220${fp}`),
  },
  {
    weight: 2,
    arbitrary: fc.string({ unit: fc.constantFrom(...PARTY_CHARS), minLength: 1, maxLength: 255 }),
  },
  { weight: 1, arbitrary: fc.constantFrom('a', ' ', ':', 'Z'.repeat(255), '-_: ') },
);

/** A party set as the participant emits it: unique, ascending by JS string order. */
export function arbPartySet(minLength = 0, maxLength = 3): fc.Arbitrary<string[]> {
  return fc.uniqueArray(arbParty, { minLength, maxLength }).map((a) => [...a].sort(byJsString));
}

/** A V1 contract id: `00` ‖ 32-byte discriminator ‖ suffix (none, the usual 36-byte one, or 0..94 random bytes). */
export const arbContractId: fc.Arbitrary<string> = fc
  .tuple(
    hex(32),
    fc.oneof(
      fc.constant(''),
      hex(32).map((h) => `ca111220${h}`),
      bytes(0, 94).map(hexOf),
      fc.constant('ff'.repeat(94)),
    ),
  )
  .map(([disc, suffix]) => `00${disc}${suffix}`);

/** A canonical Daml numeric: realistic amounts and random ones up to precision 38 / scale 37. */
export const arbNumeric: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.tuple(fc.bigInt({ min: 0n, max: 10n ** 15n }), fc.boolean()).map(([n, neg]) => {
      const s = (n / 10n ** 10n).toString();
      const f = (n % 10n ** 10n).toString().padStart(10, '0');
      return `${neg && n !== 0n ? '-' : ''}${s}.${f}`;
    }),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.boolean(),
        fc.string({ unit: fc.constantFrom(...'0123456789'), maxLength: 38 }),
        fc.string({ unit: fc.constantFrom(...'0123456789'), maxLength: 37 }),
      )
      .map(([neg, intDigits, frac]) => {
        let int = intDigits.replace(/^0+/, '').slice(0, 38 - frac.length);
        if (int === '') int = '0';
        const zero = int === '0' && /^0*$/.test(frac);
        return `${neg && !zero ? '-' : ''}${int}.${frac}`;
      }),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '0.',
      '0.0',
      '1.',
      '-1.5',
      `${'9'.repeat(38)}.`,
      `0.${'9'.repeat(37)}`,
      `-${'9'.repeat(28)}.${'9'.repeat(10)}`,
      `1.${'0'.repeat(37)}`,
    ),
  },
);

const UPPER = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZ'];
const IDENT_CHARS = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_'];

const NAME_FIRST = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz$_'];
const NAME_CHARS = [...NAME_FIRST, ...'0123456789'];

/** One segment of a dotted Daml-LF name: usually a capitalised identifier, sometimes any Daml-LF `Name`. */
const arbNameSegment: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc
      .tuple(fc.constantFrom(...UPPER), fc.string({ unit: fc.constantFrom(...IDENT_CHARS), maxLength: 14 }))
      .map(([a, b]) => a + b),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom(...NAME_FIRST),
        fc.string({ unit: fc.constantFrom(...NAME_CHARS), maxLength: 6 }),
      )
      .map(([a, b]) => a + b),
  },
);

/** A dotted name (module or entity name; entity names may contain dots too). */
export const arbDottedName: fc.Arbitrary<string> = fc
  .array(arbNameSegment, { minLength: 1, maxLength: 4 })
  .map((a) => a.join('.'));

/** Record labels, constructors and choice names: non-empty. */
export const arbLabel: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .tuple(
        fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz'),
        fc.string({ unit: fc.constantFrom(...IDENT_CHARS), maxLength: 14 }),
      )
      .map(([a, b]) => a + b),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 8 }) },
);

/** Package ids: in practice 64 lowercase hex; Daml-LF allows 1-64 of letters, digits, `-`, `_`, space. */
export const arbIdentifier: fc.Arbitrary<Identifier> = fc.record({
  packageId: fc.oneof(
    { weight: 5, arbitrary: hex(32) },
    {
      weight: 1,
      arbitrary: fc.string({
        unit: fc.constantFrom(...NAME_CHARS.filter((c) => c !== '$'), '-', ' '),
        minLength: 1,
        maxLength: 64,
      }),
    },
  ),
  moduleName: arbDottedName,
  entityName: arbDottedName,
});

const arbOptIdentifier = fc.option(arbIdentifier, { nil: undefined, freq: 3 });

/** A package name (required, non-empty). */
export const arbPackageName: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'splice-amulet',
      'splice-wallet',
      'canton-builtin-admin-workflow-ping',
      'utility-registry-holding-v0',
    ),
  },
  {
    weight: 1,
    arbitrary: fc.string({ unit: fc.constantFrom(...IDENT_CHARS, '-'), minLength: 1, maxLength: 12 }),
  },
);

// ---- values ------------------------------------------------------------------

export interface ValueArbitraries {
  value: fc.Arbitrary<Value>;
  record: fc.Arbitrary<Value>;
}

/** Arbitraries for every kind of Daml value; `record` always yields a record (create arguments, choice arguments). */
export function arbValues(opts: ArbOptions = {}): ValueArbitraries {
  const maxDepth = Math.min(opts.maxValueDepth ?? 4, 90);
  const scalar: fc.Arbitrary<Value> = fc.oneof(
    fc.constant<Value>({ kind: 'unit' }),
    fc.boolean().map((value): Value => ({ kind: 'bool', value })),
    arbInt64(opts.int64).map((value): Value => ({ kind: 'int64', value })),
    arbNumeric.map((value): Value => ({ kind: 'numeric', value })),
    arbInt64(opts.timestamp).map((value): Value => ({ kind: 'timestamp', value })),
    fc
      .oneof(fc.integer({ min: -719_162, max: 2_932_896 }), fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }))
      .map((value): Value => ({ kind: 'date', value })),
    arbParty.map((value): Value => ({ kind: 'party', value })),
    arbText.map((value): Value => ({ kind: 'text', value })),
    arbContractId.map((value): Value => ({ kind: 'contractId', value })),
  );
  const enumValue = fc
    .record({ enumId: arbOptIdentifier, constructor: arbLabel })
    .map((e): Value => ({ kind: 'enum', ...e }));

  const tree = fc.letrec<{ value: Value; record: Value }>((tie) => ({
    // At the depth limit fc.oneof falls back to its first member: the scalars.
    value: fc.oneof(
      { maxDepth, depthSize: 'small', withCrossShrink: true },
      { weight: 6, arbitrary: scalar },
      { weight: 1, arbitrary: enumValue },
      {
        weight: 1,
        arbitrary: fc
          .option(tie('value'), { nil: undefined })
          .map((value): Value => ({ kind: 'optional', value })),
      },
      {
        weight: 1,
        arbitrary: fc
          .array(tie('value'), { maxLength: 5 })
          .map((elements): Value => ({ kind: 'list', elements })),
      },
      {
        weight: 1,
        arbitrary: fc
          .uniqueArray(fc.record({ key: arbText, value: tie('value') }), {
            selector: (e) => e.key,
            maxLength: 4,
          })
          .map(
            (entries): Value => ({
              kind: 'textMap',
              entries: [...entries].sort((a, b) => byUtf8(a.key, b.key)),
            }),
          ),
      },
      {
        weight: 1,
        arbitrary: fc
          .array(fc.record({ key: tie('value'), value: tie('value') }), { maxLength: 3 })
          .map((entries): Value => ({ kind: 'genMap', entries })),
      },
      { weight: 2, arbitrary: tie('record') },
      {
        weight: 1,
        arbitrary: fc
          .record({ variantId: arbOptIdentifier, constructor: arbLabel, value: tie('value') })
          .map((v): Value => ({ kind: 'variant', ...v })),
      },
    ),
    record: fc
      .record({
        recordId: arbOptIdentifier,
        fields: fc.uniqueArray(fc.record({ label: arbLabel, value: tie('value') }), {
          selector: (f) => f.label,
          maxLength: 6,
        }),
      })
      .map((r): Value => ({ kind: 'record', ...r })),
  }));
  return { value: tree.value, record: tree.record };
}

/** Any Daml value (see `arbValues`). */
export function arbValue(opts: ArbOptions = {}): fc.Arbitrary<Value> {
  return arbValues(opts).value;
}

// ---- nodes -------------------------------------------------------------------

interface NodeArbitraries {
  create: fc.Arbitrary<CreateNode>;
  exercise: fc.Arbitrary<ExerciseNode>;
  fetch: fc.Arbitrary<FetchNode>;
  queryByKey: fc.Arbitrary<QueryByKeyNode>;
  lfVersion: fc.Arbitrary<string>;
}

function arbNodes(opts: ArbOptions): NodeArbitraries {
  const v3 = opts.scheme === 'v3';
  const { value, record } = arbValues(opts);
  const lfVersion = v3 ? fc.constantFrom('2.1', '2') : fc.constant('2.1');
  const keyWithMaintainers: fc.Arbitrary<GlobalKeyWithMaintainers> = fc.record({
    key: fc.record({
      templateId: arbIdentifier,
      packageName: fc.oneof(arbPackageName, fc.constant('')),
      key: value,
      hash: arbSeed,
    }),
    maintainers: arbPartySet(1, 2),
  });
  const optKey: fc.Arbitrary<GlobalKeyWithMaintainers | undefined> = v3
    ? fc.option(keyWithMaintainers, { nil: undefined })
    : fc.constant(undefined);
  const keyAndByKey = optKey.chain((key) =>
    (key ? fc.boolean() : fc.constant(false)).map((byKey) => ({ key, byKey })),
  );

  const create: fc.Arbitrary<CreateNode> = fc.record({
    type: fc.constant('create' as const),
    lfVersion,
    contractId: arbContractId,
    packageName: arbPackageName,
    templateId: arbIdentifier,
    argument: fc.oneof({ weight: 4, arbitrary: record }, { weight: 1, arbitrary: value }),
    signatories: arbPartySet(1, 3),
    stakeholders: arbPartySet(1, 4),
    key: optKey,
  });
  const exercise: fc.Arbitrary<ExerciseNode> = fc
    .record({
      lfVersion,
      contractId: arbContractId,
      packageName: arbPackageName,
      templateId: arbIdentifier,
      signatories: arbPartySet(1, 3),
      stakeholders: arbPartySet(1, 4),
      actingParties: arbPartySet(1, 3),
      interfaceId: arbOptIdentifier,
      choiceId: arbLabel,
      chosenValue: fc.oneof({ weight: 4, arbitrary: record }, { weight: 1, arbitrary: value }),
      consuming: fc.boolean(),
      exerciseResult: fc.option(value, { nil: undefined, freq: 4 }),
      choiceObservers: arbPartySet(0, 2),
      kb: keyAndByKey,
    })
    .map(
      ({ kb, ...e }): ExerciseNode => ({
        type: 'exercise',
        ...e,
        children: [],
        key: kb.key,
        byKey: kb.byKey,
      }),
    );
  const fetch: fc.Arbitrary<FetchNode> = fc
    .record({
      lfVersion,
      contractId: arbContractId,
      packageName: arbPackageName,
      templateId: arbIdentifier,
      signatories: arbPartySet(1, 3),
      stakeholders: arbPartySet(1, 4),
      actingParties: arbPartySet(0, 3),
      interfaceId: arbOptIdentifier,
      kb: keyAndByKey,
    })
    .map(({ kb, ...f }): FetchNode => ({ type: 'fetch', ...f, key: kb.key, byKey: kb.byKey }));
  const queryByKey: fc.Arbitrary<QueryByKeyNode> = fc.record({
    type: fc.constant('queryByKey' as const),
    lfVersion,
    packageName: arbPackageName,
    templateId: arbIdentifier,
    exhaustive: fc.boolean(),
    key: keyWithMaintainers,
    result: fc.array(arbContractId, { maxLength: 3 }),
  });
  return { create, exercise, fetch, queryByKey, lfVersion };
}

/** A node of the generated forest before ids are assigned. */
interface Shape {
  body: NodeBody;
  seed: Uint8Array | undefined;
  kids: Shape[];
}

/** mulberry32: a tiny deterministic PRNG, driven by a generated integer (so shrinking stays reproducible). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffle<T>(xs: T[], rnd: () => number): T[] {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

interface Layout {
  /** 'preorder': ids 0..n−1 in pre-order (what participants do); 'sparse': distinct random int32 ids. */
  ids: 'preorder' | 'sparse';
  /** Order of `nodes` and `node_seeds` on the wire: pre-order, or shuffled (the hash must not depend on it). */
  nodeOrder: 'preorder' | 'shuffled';
  seedOrder: 'nodes' | 'shuffled';
  random: number;
}

/** Turns generated shapes into roots, nodes (with children ids) and seeds. */
function layOut(
  roots: Shape[],
  layout: Layout,
): Pick<PreparedTransaction['transaction'], 'roots' | 'nodes' | 'nodeSeeds'> {
  const rnd = prng(layout.random);
  const order: Shape[] = [];
  const visit = (s: Shape) => {
    order.push(s);
    for (const k of s.kids) visit(k);
  };
  for (const r of roots) visit(r);
  let ids: number[];
  if (layout.ids === 'preorder') ids = order.map((_, i) => i);
  else {
    const used = new Set<number>();
    ids = order.map(() => {
      for (;;) {
        const pick = rnd() < 0.3 ? Math.floor(rnd() * 64) : Math.floor(rnd() * 0x80000000);
        if (!used.has(pick)) {
          used.add(pick);
          return pick;
        }
      }
    });
  }
  const idOf = new Map<Shape, number>(order.map((s, i) => [s, ids[i]!]));
  const nodeOf = (s: Shape): Node => {
    const body: NodeBody =
      s.body.type === 'exercise' || s.body.type === 'rollback'
        ? { ...s.body, children: s.kids.map((k) => String(idOf.get(k))) }
        : s.body;
    return { nodeId: String(idOf.get(s)), node: body };
  };
  let nodes = order.map(nodeOf);
  const seedList: NodeSeed[] = order
    .filter((s) => s.seed !== undefined)
    .map((s) => ({ nodeId: idOf.get(s)!, seed: s.seed! }));
  if (layout.nodeOrder === 'shuffled') nodes = shuffle(nodes, rnd);
  let nodeSeeds: NodeSeed[];
  if (layout.seedOrder === 'shuffled') nodeSeeds = shuffle(seedList, rnd);
  else {
    const pos = new Map(nodes.map((n, i) => [Number(n.nodeId), i]));
    nodeSeeds = [...seedList].sort((a, b) => pos.get(a.nodeId)! - pos.get(b.nodeId)!);
  }
  return { roots: roots.map((r) => String(idOf.get(r))), nodes, nodeSeeds };
}

// ---- whole transactions ------------------------------------------------------

/** The metadata: sorted non-empty act_as, lowercase UUID, sorted input contracts, optional time bounds. */
export function arbMetadata(opts: ArbOptions = {}): fc.Arbitrary<Metadata> {
  const { create } = arbNodes(opts);
  const inputContract: fc.Arbitrary<InputContract> = fc.record({
    contract: create,
    createdAt: arbUint64,
    eventBlob: bytes(0, 48),
  });
  const optTime = fc.option(arbUint64, { nil: undefined });
  return fc.record({
    submitterInfo: fc.record({
      actAs: arbPartySet(1, 3),
      commandId: fc.oneof(fc.uuid(), arbText),
    }),
    synchronizerId: fc.oneof(
      { weight: 3, arbitrary: hex(32).map((h) => `global-domain::1220${h}`) },
      { weight: 1, arbitrary: hex(32).map((h) => `global-domain::1220${h}::35-0`) },
      { weight: 1, arbitrary: arbText },
    ),
    mediatorGroup: fc.oneof(
      { weight: 3, arbitrary: fc.constant(0) },
      { weight: 1, arbitrary: fc.integer({ min: 0, max: 2 ** 32 - 1 }) },
    ),
    transactionUuid: fc.uuid().map((u) => u.toLowerCase()),
    preparationTime: arbUint64,
    inputContracts: fc
      .uniqueArray(inputContract, {
        selector: (ic) => ic.contract.contractId,
        maxLength: opts.maxInputContracts ?? 3,
      })
      .map((ics) => [...ics].sort((a, b) => byJsString(a.contract.contractId, b.contract.contractId))),
    minLedgerEffectiveTime: optTime,
    maxLedgerEffectiveTime: optTime,
    maxRecordTime: optTime,
  });
}

/** A whole valid PreparedTransaction model (see the file comment for what "valid" covers). */
export function arbPreparedTransaction(opts: ArbOptions = {}): fc.Arbitrary<PreparedTransaction> {
  const v3 = opts.scheme === 'v3';
  const n = arbNodes(opts);
  const maxChildren = opts.maxChildren ?? 4;
  const seeded = <T extends NodeBody>(body: fc.Arbitrary<T>): fc.Arbitrary<Shape> =>
    fc.record({ body, seed: arbSeed }).map(({ body, seed }) => ({ body, seed, kids: [] }));
  const unseeded = <T extends NodeBody>(body: fc.Arbitrary<T>): fc.Arbitrary<Shape> =>
    body.map((b) => ({ body: b, seed: undefined, kids: [] }));
  const leaves: fc.Arbitrary<Shape>[] = [seeded(n.create), unseeded(n.fetch), seeded(n.exercise)];
  if (v3) leaves.push(unseeded(n.queryByKey));
  const leaf = fc.oneof(...leaves);
  const { tree } = fc.letrec<{ tree: Shape }>((tie) => ({
    tree: fc.oneof(
      { maxDepth: opts.maxTreeDepth ?? 3, depthSize: 'small', withCrossShrink: true },
      { weight: 3, arbitrary: leaf },
      {
        weight: 2,
        arbitrary: fc
          .record({
            body: n.exercise,
            seed: arbSeed,
            kids: fc.array(tie('tree'), { maxLength: maxChildren }),
          })
          .map((s): Shape => s),
      },
      {
        weight: 1,
        arbitrary: fc
          .record({ kids: fc.array(tie('tree'), { maxLength: maxChildren }) })
          .map(({ kids }): Shape => ({ body: { type: 'rollback', children: [] }, seed: undefined, kids })),
      },
    ),
  }));
  const layout: fc.Arbitrary<Layout> = fc.record({
    ids: fc.constantFrom('preorder', 'sparse'),
    nodeOrder: fc.constantFrom('preorder', 'shuffled'),
    seedOrder: fc.constantFrom('nodes', 'shuffled'),
    random: fc.integer(),
  });
  return fc
    .record({
      version: n.lfVersion,
      roots: fc.array(tree, { minLength: 1, maxLength: maxChildren }),
      layout,
      metadata: arbMetadata(opts),
    })
    .map(({ version, roots, layout, metadata }) => ({
      transaction: { version, ...layOut(roots, layout) },
      metadata,
    }));
}
