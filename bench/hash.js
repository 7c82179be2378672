/**
 * Hashing benchmark: `npm run bench:hash` (builds, then runs this file with --expose-gc).
 *
 * From one process it measures
 *  - throughput (tx/s, MB/s of protobuf bytes) of our V2 hasher and of
 *    @canton-network/core-tx-visualizer's hashPreparedTransaction, both given
 *    base64 text as a participant returns it, on the real vectors and on a
 *    generated 1,000-node transaction; SHA-256 alone over the same bytes is the
 *    ceiling. Warm-up first, then interleaved rounds; the median round is kept.
 *  - peak memory growth while hashing a 20 MB transaction (one create whose
 *    argument holds a 20 MB text): a worker thread samples the process RSS
 *    every millisecond, and heapUsed + external (external includes
 *    arrayBuffers, so adding arrayBuffers again would count Buffers twice) is
 *    read when the hash returns, before any collection; both against a post-GC
 *    baseline. The larger of the two growths is the figure checked.
 *
 * It prints a table and a PASS/FAIL verdict for the targets (ratio ≥ 20× on the
 * real vectors, peak memory growth ≤ 5× the input size) and always exits 0:
 * it is a report, not a gate.
 *
 * Real vectors: $VECTORS_DIR, default ../../shared/vectors/real/ next to the
 * repository (JSON files with `prepared_transaction_base64`).
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { hashPreparedTransaction as visualizerHash } from '@canton-network/core-tx-visualizer';
import {
  bytesToBase64,
  bytesToHex,
  encodePreparedTransaction,
  hashPreparedTransaction,
} from '../dist/index.js';

const TARGET_RATIO = 20;
const TARGET_MEMORY = 5;
const ROUNDS = 5;
const ROUND_MS = 600;
const WARMUP_MS = 1000;
const BIG_TEXT_BYTES = 20_000_000;

const gc = globalThis.gc ?? (() => {});
const MB = 1e6;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const sha256 = (data) => createHash('sha256').update(data).digest();
const fmt = (x, digits = 1) =>
  x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

// ---- inputs -------------------------------------------------------------------

function loadRealVectors() {
  const dir =
    process.env.VECTORS_DIR ?? fileURLToPath(new URL('../../shared/vectors/real/', import.meta.url));
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

/** An AmuletRules_Transfer-like exercise root with 999 Amulet create children. */
function thousandNodeTransaction() {
  const children = 999;
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
function bigTextTransaction(size) {
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

// ---- throughput ---------------------------------------------------------------

function loopSync(fn, ms) {
  let n = 0;
  const t0 = performance.now();
  let t = 0;
  do {
    fn();
    n++;
    t = performance.now() - t0;
  } while (t < ms);
  return (n * 1000) / t;
}

async function loopAsync(fn, ms) {
  let n = 0;
  const t0 = performance.now();
  let t = 0;
  do {
    await fn();
    n++;
    t = performance.now() - t0;
  } while (t < ms);
  return (n * 1000) / t;
}

let sink = 0; // keeps results alive
const contenders = (set) => [
  {
    key: 'ours',
    run: (ms) =>
      loopSync(() => {
        for (const v of set) sink ^= hashPreparedTransaction(v.b64, { scheme: 'v2' })[0];
      }, ms),
  },
  {
    key: 'oursBytes',
    run: (ms) =>
      loopSync(() => {
        for (const v of set) sink ^= hashPreparedTransaction(v.bytes, { scheme: 'v2' })[0];
      }, ms),
  },
  {
    key: 'theirs',
    run: (ms) =>
      loopAsync(async () => {
        for (const v of set) sink ^= (await visualizerHash(v.b64, 'hex')).charCodeAt(0);
      }, ms),
  },
  {
    key: 'sha',
    run: (ms) =>
      loopSync(() => {
        for (const v of set) sink ^= sha256(v.bytes)[0];
      }, ms),
  },
];

/** Interleaved rounds; returns the median batch rate per contender (batches/s). */
async function measure(set) {
  const cs = contenders(set);
  for (const c of cs) await c.run(WARMUP_MS);
  const rates = Object.fromEntries(cs.map((c) => [c.key, []]));
  for (let r = 0; r < ROUNDS; r++) {
    gc();
    // Rotate the order each round so no contender always runs right after a GC.
    for (let k = 0; k < cs.length; k++) {
      const c = cs[(r + k) % cs.length];
      rates[c.key].push(await c.run(ROUND_MS));
    }
  }
  const bytes = set.reduce((a, v) => a + v.bytes.length, 0);
  const out = {};
  for (const [k, xs] of Object.entries(rates)) {
    const batches = median(xs);
    out[k] = { txs: batches * set.length, mbs: (batches * bytes) / MB };
  }
  return { ...out, bytes, count: set.length };
}

// ---- memory -------------------------------------------------------------------

const SAMPLER = `
const { parentPort } = require('node:worker_threads');
let max = 0;
const tick = () => { const r = process.memoryUsage.rss(); if (r > max) max = r; };
const timer = setInterval(tick, 1);
parentPort.on('message', (m) => {
  if (m === 'reset') { max = 0; tick(); parentPort.postMessage('ok'); }
  else { tick(); clearInterval(timer); parentPort.postMessage(max); }
});
`;

/** JS heap plus memory outside it (`external` already includes `arrayBuffers`, i.e. Buffers). */
const heapTotal = (m) => m.heapUsed + m.external;

async function peakGrowth(label, input, inputSize, hash) {
  const worker = new Worker(SAMPLER, { eval: true });
  const reply = () => new Promise((resolve) => worker.once('message', resolve));
  await new Promise((r) => setTimeout(r, 50));
  gc();
  gc();
  const before = process.memoryUsage();
  const maxRssBefore = process.resourceUsage().maxRSS * 1024;
  worker.postMessage('reset');
  await reply();
  const t0 = performance.now();
  const result = await hash(input);
  const ms = performance.now() - t0;
  const atReturn = process.memoryUsage();
  worker.postMessage('stop');
  const sampled = await reply();
  await worker.terminate();
  const maxRssAfter = process.resourceUsage().maxRSS * 1024;
  const rssPeak = Math.max(sampled, atReturn.rss, maxRssAfter > maxRssBefore ? maxRssAfter : 0);
  const rssGrowth = rssPeak - before.rss;
  const heapGrowth = heapTotal(atReturn) - heapTotal(before);
  gc();
  return {
    label,
    ms,
    result,
    inputSize,
    rssGrowth,
    heapUsedGrowth: atReturn.heapUsed - before.heapUsed,
    externalGrowth: atReturn.external - before.external,
    heapGrowth,
    ratio: Math.max(rssGrowth, heapGrowth) / inputSize,
  };
}

// ---- main ---------------------------------------------------------------------

async function main() {
  const started = performance.now();
  console.log('canton-signer hash benchmark');
  console.log(
    `node ${process.version}, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), ${os.platform()} ${os.arch()}`,
  );
  if (!globalThis.gc)
    console.log('warning: run with --expose-gc (npm run bench:hash) for stable memory figures');

  // Memory first, on a clean heap.
  const bigText = bigTextTransaction(BIG_TEXT_BYTES);
  const bigBytes = encodePreparedTransaction(bigText);
  bigText.transaction.nodes.length = 0;
  const bigB64 = bytesToBase64(bigBytes);
  gc();
  const memOurs = await peakGrowth('ours, bytes input', bigBytes, bigBytes.length, (b) =>
    bytesToHex(hashPreparedTransaction(b, { scheme: 'v2' })),
  );
  const memOursB64 = await peakGrowth('ours, base64 input', bigB64, bigBytes.length, (b) =>
    bytesToHex(hashPreparedTransaction(b, { scheme: 'v2' })),
  );
  const memTheirs = await peakGrowth('core-tx-visualizer, base64 input', bigB64, bigBytes.length, (b) =>
    visualizerHash(b, 'hex'),
  );
  const memAgree = memOurs.result === memTheirs.result && memOurs.result === memOursB64.result;

  // Correctness checks before timing anything.
  const real = loadRealVectors();
  let realOk = 0;
  let realTheirsOk = 0;
  for (const v of real) {
    if (bytesToHex(hashPreparedTransaction(v.b64, { scheme: 'v2' })) === v.expected) realOk++;
    if ((await visualizerHash(v.b64, 'hex')) === v.expected) realTheirsOk++;
  }
  const thousand = thousandNodeTransaction();
  const thousandBytes = encodePreparedTransaction(thousand);
  const thousandSet = [{ name: '1000-node', bytes: thousandBytes, b64: bytesToBase64(thousandBytes) }];
  const oursThousand = bytesToHex(hashPreparedTransaction(thousandSet[0].b64, { scheme: 'v2' }));
  let theirsThousand;
  try {
    theirsThousand = await visualizerHash(thousandSet[0].b64, 'hex');
  } catch (e) {
    theirsThousand = `refused: ${e instanceof Error ? e.message : String(e)}`;
  }
  console.log('');
  console.log(`check: real vectors, our V2 hash = published hash: ${realOk}/${real.length}`);
  console.log(
    `check: real vectors, core-tx-visualizer hash = published hash: ${realTheirsOk}/${real.length}`,
  );
  console.log(
    `check: 1,000-node transaction (${thousand.transaction.nodes.length} nodes, ${thousandBytes.length} bytes): ` +
      `core-tx-visualizer ${theirsThousand.startsWith('refused') ? theirsThousand : 'accepts it'}; ` +
      `hashes ${oursThousand === theirsThousand ? 'agree' : 'DIFFER'} (${oursThousand.slice(0, 16)}…)`,
  );
  console.log(`check: 20 MB transaction, all three hashes agree: ${memAgree ? 'yes' : 'NO'}`);

  const realM = await measure(real);
  const bigM = await measure(thousandSet);

  const row = (name, m) => {
    const ratio = m.ours.mbs / m.theirs.mbs;
    return `| ${name} | ${fmt(m.ours.txs, 0)} | ${fmt(m.ours.mbs)} | ${fmt(m.theirs.txs, 0)} | ${fmt(m.theirs.mbs)} | **${fmt(ratio)}×** | ${fmt(m.sha.mbs)} | ${fmt((100 * m.ours.mbs) / m.sha.mbs, 0)} % |`;
  };
  const realKB = realM.bytes / 1000;
  console.log('');
  console.log(
    'Throughput (V2 hash from base64 text; MB/s = 10^6 protobuf bytes per second; median of rounds)',
  );
  console.log('');
  console.log(
    '| workload | ours tx/s | ours MB/s | core-tx-visualizer tx/s | core-tx-visualizer MB/s | ours / theirs | SHA-256 alone MB/s | ours vs SHA-256 |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  console.log(row(`${real.length} real vectors (${fmt(realKB, 0)} kB total)`, realM));
  console.log(row(`1,000-node transaction (${fmt(thousandBytes.length / 1000, 0)} kB)`, bigM));
  console.log('');
  console.log(
    `For reference, ours from raw bytes (no base64 step): ${fmt(realM.oursBytes.mbs)} MB/s on the real vectors, ` +
      `${fmt(bigM.oursBytes.mbs)} MB/s on the 1,000-node transaction.`,
  );
  console.log('');
  console.log(
    `Peak memory growth hashing a ${fmt(bigBytes.length / MB)} MB transaction (growth over a post-GC baseline; ratio = max(rss, heap) ÷ input bytes)`,
  );
  console.log('');
  console.log(
    '| hasher | time | rss peak growth | heapUsed growth | external growth (incl. Buffers) | peak ÷ input |',
  );
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const m of [memOurs, memOursB64, memTheirs]) {
    console.log(
      `| ${m.label} | ${fmt(m.ms, 0)} ms | ${fmt(m.rssGrowth / MB)} MB | ${fmt(m.heapUsedGrowth / MB)} MB | ${fmt(m.externalGrowth / MB)} MB | ${fmt(m.ratio, 2)}× |`,
    );
  }

  const ratio = realM.ours.mbs / realM.theirs.mbs;
  const memRatio = Math.max(memOurs.ratio, memOursB64.ratio);
  const ratioOk = ratio >= TARGET_RATIO;
  const memOk = memRatio <= TARGET_MEMORY;
  const checksOk = realOk === real.length && oursThousand === theirsThousand && memAgree;
  console.log('');
  console.log(
    `target: ours/theirs on real vectors >= ${TARGET_RATIO}x: ${fmt(ratio)}x ${ratioOk ? 'PASS' : 'FAIL'}`,
  );
  console.log(
    `target: peak memory growth <= ${TARGET_MEMORY}x input (worst of bytes/base64 input): ${fmt(memRatio, 2)}x ${memOk ? 'PASS' : 'FAIL'}`,
  );
  console.log(`checks: hashes correct and in agreement: ${checksOk ? 'PASS' : 'FAIL'}`);
  console.log(`(finished in ${fmt((performance.now() - started) / 1000)} s, checksum ${sink & 0xff})`);
  console.log(ratioOk && memOk && checksOk ? 'VERDICT: PASS' : 'VERDICT: FAIL');
}

await main();
