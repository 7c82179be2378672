/**
 * Values written straight as wire bytes (not through the project's encoder) into
 * the argument of a real transaction's create node: edge-case scalars (int64
 * varints of every length, overlong and sign-extended; timestamps; numerics;
 * contract ids; text around the 32-byte UTF-8 threshold with invalid sequences),
 * composites with fields shuffled out of field-number order, repeated labels,
 * repeated singular fields, unknown fields, then byte damage inside the value.
 * The streaming hash (wire walker into the hash) must equal decode-then-hash,
 * and each must accept exactly what the other accepts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { encodePreparedTransaction } from '../../src/hashing/encode.js';
import { TransactionError } from '../../src/hashing/errors.js';
import { bytesToHex } from '../../src/hashing/input.js';
import type { HashingScheme, HashParts } from '../../src/hashing/transaction-hash.js';
import { hashParts, hashPartsStreaming } from '../../src/hashing/transaction-hash.js';
import {
  concat,
  editMessage,
  lenField,
  parseFields,
  tag,
  varint,
  WT_I64,
  WT_VARINT,
} from '../support/protobuf.js';
import { be32, be64, createEncoding, identifier, opt, sha256, u8 } from '../support/spec-hash.js';
import { VECTORS_DIR } from '../support/vectors.js';

const MARKER = 'ZQXJ-value-marker-ZQXJ';

function baseTransaction(): Uint8Array {
  const v = JSON.parse(
    readFileSync(join(VECTORS_DIR, 'real/v2_canton_network_wallet_tx_visualizer_create_ping.json'), 'utf8'),
  );
  const m = decodePreparedTransaction(Buffer.from(v.prepared_transaction_base64, 'base64'));
  const n = m.transaction.nodes.find((x) => x.node.type === 'create');
  if (n?.node.type !== 'create') throw new Error('no create node');
  n.node.argument = { kind: 'text', value: MARKER };
  return encodePreparedTransaction(m);
}

/** The path (field, occurrence) down to the length-delimited field whose payload is exactly `target`. */
function pathTo(buf: Uint8Array, target: Uint8Array): [number, number][] | undefined {
  let fields: ReturnType<typeof parseFields>;
  try {
    fields = parseFields(buf);
  } catch {
    return undefined;
  }
  const seen = new Map<number, number>();
  for (const f of fields) {
    const occ = seen.get(f.field) ?? 0;
    seen.set(f.field, occ + 1);
    if (f.wireType !== 2) continue;
    const payload = buf.subarray(f.payloadStart, f.end);
    if (Buffer.from(payload).equals(Buffer.from(target))) return [[f.field, occ]];
    if (!Buffer.from(payload).includes(Buffer.from(target))) continue;
    const rest = pathTo(payload, target);
    if (rest) return [[f.field, occ], ...rest];
  }
  return undefined;
}

const BASE = baseTransaction();
const MARKER_VALUE = lenField(8, Buffer.from(MARKER));
const PATH = pathTo(BASE, MARKER_VALUE)!;

function withValue(raw: Uint8Array): Uint8Array {
  return editMessage(BASE, PATH, () => raw);
}

type Outcome = { hashes: string[] } | { refused: string };

function outcome(fn: () => HashParts): Outcome {
  try {
    const p = fn();
    return {
      hashes: [bytesToHex(p.hash), ...[...p.nodeHashes].map(([id, h]) => `${id}=${bytesToHex(h)}`)],
    };
  } catch (e) {
    if (e instanceof TransactionError) return { refused: e.message };
    throw e;
  }
}

// ---- an independent value encoding (hashing spec §6), from the raw bytes with the lax test parser ----
function byField(b: Uint8Array): Map<number, Uint8Array[]> {
  const m = new Map<number, Uint8Array[]>();
  for (const f of parseFields(b)) {
    const list = m.get(f.field) ?? [];
    list.push(b.subarray(f.wireType === 2 ? f.payloadStart : f.start, f.end));
    m.set(f.field, list);
  }
  return m;
}
function readVarint(b: Uint8Array): bigint {
  const t = parseFields(b)[0]!;
  let v = 0n;
  let shift = 0n;
  for (let i = t.payloadStart; i < t.end; i++) {
    v |= BigInt(b[i]! & 0x7f) << shift;
    shift += 7n;
  }
  return BigInt.asUintN(64, v);
}
const one = (m: Map<number, Uint8Array[]>, f: number) => m.get(f)?.[0];
function specIdent(b: Uint8Array | undefined): Buffer | undefined {
  if (b === undefined) return undefined;
  const m = byField(b);
  const s = (f: number) => Buffer.from(one(m, f) ?? []).toString('utf8');
  return identifier({ packageId: s(1), moduleName: s(2), entityName: s(3) });
}
const specStr = (b: Uint8Array | undefined) => Buffer.concat([be32(b?.length ?? 0), b ?? Buffer.alloc(0)]);
function specValue(b: Uint8Array): Buffer {
  const f = parseFields(b)[0]!;
  const p = b.subarray(f.payloadStart, f.end);
  switch (f.field) {
    case 1:
      return u8(0);
    case 2:
      return Buffer.concat([u8(1), u8(Number(readVarint(b)))]);
    case 3: {
      const zz = readVarint(b);
      return Buffer.concat([u8(2), be64((zz >> 1n) ^ -(zz & 1n))]);
    }
    case 4:
      return Buffer.concat([u8(5), be32(Number(BigInt.asIntN(32, readVarint(b))))]);
    case 5:
      return Buffer.concat([u8(4), be64(Buffer.from(b.subarray(f.payloadStart, f.end)).readBigInt64LE())]);
    case 6:
      return Buffer.concat([u8(3), specStr(p)]);
    case 7:
      return Buffer.concat([u8(6), specStr(p)]);
    case 8:
      return Buffer.concat([u8(7), specStr(p)]);
    case 9:
      return Buffer.concat([u8(8), specStr(Buffer.from(Buffer.from(p).toString('latin1'), 'hex'))]);
    case 10: {
      const x = one(byField(p), 1);
      return Buffer.concat([u8(9), opt(x === undefined ? undefined : specValue(x))]);
    }
    case 11: {
      const xs = byField(p).get(1) ?? [];
      return Buffer.concat([u8(0x0a), be32(xs.length), ...xs.map(specValue)]);
    }
    case 12: {
      const es = (byField(p).get(1) ?? []).map(byField);
      return Buffer.concat([
        u8(0x0b),
        be32(es.length),
        ...es.flatMap((e) => [specStr(one(e, 1)), specValue(one(e, 2)!)]),
      ]);
    }
    case 13: {
      const es = (byField(p).get(1) ?? []).map(byField);
      return Buffer.concat([
        u8(0x0f),
        be32(es.length),
        ...es.flatMap((e) => [specValue(one(e, 1)!), specValue(one(e, 2)!)]),
      ]);
    }
    case 14: {
      const m = byField(p);
      const fs = (m.get(2) ?? []).map(byField);
      return Buffer.concat([
        u8(0x0c),
        opt(specIdent(one(m, 1))),
        be32(fs.length),
        ...fs.flatMap((x) => [opt(specStr(one(x, 1))), specValue(one(x, 2)!)]),
      ]);
    }
    case 15: {
      const m = byField(p);
      return Buffer.concat([u8(0x0d), opt(specIdent(one(m, 1))), specStr(one(m, 2)), specValue(one(m, 3)!)]);
    }
    case 16: {
      const m = byField(p);
      return Buffer.concat([u8(0x0e), opt(specIdent(one(m, 1))), specStr(one(m, 2))]);
    }
    default:
      throw new Error(`field ${f.field}`);
  }
}

/** The create node's hash by the spec, with `raw` as its argument (everything else from the model). */
function specCreateHash(bytes: Uint8Array, raw: Uint8Array, scheme: HashingScheme): [string, string] {
  const m = decodePreparedTransaction(bytes);
  const n = m.transaction.nodes.find((x) => x.node.type === 'create')!;
  if (n.node.type !== 'create') throw new Error('no create');
  const seed = m.transaction.nodeSeeds.find((s) => String(s.nodeId) === n.nodeId)?.seed;
  const enc = createEncoding(scheme, { ...n.node, seed, argument: specValue(raw) });
  return [n.nodeId, bytesToHex(sha256(enc))];
}

let accepted = 0;
function agree(raw: Uint8Array, scheme: HashingScheme, base = BASE): void {
  const bytes = base === BASE ? withValue(raw) : editMessage(base, pathTo(base, MARKER_VALUE)!, () => raw);
  const model = outcome(() => hashParts(decodePreparedTransaction(bytes), { scheme }));
  const stream = outcome(() => hashPartsStreaming(bytes, scheme));
  const pub = outcome(() => hashParts(bytes, { scheme }));
  const ctx = `value ${Buffer.from(raw).toString('hex')}`;
  if ('hashes' in model) {
    accepted++;
    expect(stream, ctx).toEqual(model);
    expect(pub, ctx).toEqual(model);
    if (base === BASE) {
      const [id, h] = specCreateHash(bytes, raw, scheme);
      expect(model.hashes, `${ctx}: spec create hash`).toContain(`${id}=${h}`);
    }
  } else {
    expect('refused' in stream, `${ctx}: streaming accepted what decode refuses (${model.refused})`).toBe(
      true,
    );
    expect(pub, ctx).toEqual(model);
  }
}

// ---- raw value builders ----
const B = (...xs: number[]) => Uint8Array.from(xs);
const vfield = (n: number, payload: Uint8Array) => lenField(n, payload);
const textBytes = (b: Uint8Array) => vfield(8, b);
const IDENT = concat(
  lenField(1, Buffer.from('a'.repeat(64))),
  lenField(2, Buffer.from('Mod.Sub')),
  lenField(3, Buffer.from('T')),
);

function rawVarint64(v: bigint, overlong: number): Uint8Array {
  const base = [...varint(v)];
  if (overlong > 0 && base.length < 10) {
    base[base.length - 1]! |= 0x80;
    for (let i = 1; i < overlong && base.length < 9; i++) base.push(0x80);
    base.push(0);
  }
  return Uint8Array.from(base);
}

const arbInt64Wire = fc
  .tuple(
    fc.oneof(
      fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
      fc.constantFrom(
        0n,
        1n,
        2n,
        (1n << 63n) - 1n,
        1n << 63n,
        (1n << 64n) - 1n,
        (1n << 64n) - 2n,
        0xffffffffn,
        0x100000000n,
      ),
    ),
    fc.constantFrom(0, 0, 0, 1, 2),
  )
  .map(([zz, ov]) => concat(tag(3, WT_VARINT), rawVarint64(zz, ov)));

const arbOddVarint = fc.constantFrom(
  // 10-byte varints with the top byte 1 and 2, 11-byte
  concat(tag(3, WT_VARINT), B(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)),
  concat(tag(3, WT_VARINT), B(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02)),
  concat(tag(3, WT_VARINT), B(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01)),
  concat(tag(3, WT_VARINT), B(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x81, 0x00)),
  concat(tag(4, WT_VARINT), varint(-1n)),
  concat(tag(4, WT_VARINT), varint(-2147483648n)),
  concat(tag(4, WT_VARINT), varint(2147483647n)),
  concat(tag(4, WT_VARINT), varint(2147483648n)),
  concat(tag(4, WT_VARINT), varint(-2147483649n)),
  concat(tag(2, WT_VARINT), varint(2)),
  concat(tag(2, WT_VARINT), varint(1)),
  concat(tag(2, WT_VARINT), varint(0)),
);

const arbTimestamp = fc
  .oneof(
    fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n }),
    fc.constantFrom(-(1n << 63n), (1n << 63n) - 1n, 0n, -1n, -62135596800000000n, 253402300799999999n),
  )
  .map((t) => {
    const b = Buffer.alloc(8);
    b.writeBigInt64LE(t);
    return concat(tag(5, WT_I64), b);
  });

const NUMERICS = [
  '0.',
  '0.0',
  '-0.0',
  '-0.',
  '00.1',
  '1.',
  '-1.5',
  '1e5',
  '1.0e5',
  '+1.0',
  '.5',
  '1..0',
  '1.2.3',
  '',
  '12345678901234567890123456789012345678.',
  '1234567890123456789012345678901234567.0',
  `0.${'0'.repeat(37)}`,
  `0.${'0'.repeat(38)}`,
  `0.${'1'.repeat(37)}`,
  '١.٠',
  '1.\u0000',
  '-',
  '-.5',
];
const arbNumeric = fc.constantFrom(...NUMERICS).map((s) => vfield(6, Buffer.from(s)));

const CIDS = [
  `00${'ab'.repeat(32)}`,
  `00${'ab'.repeat(32)}${'cd'.repeat(94)}`,
  `00${'ab'.repeat(32)}${'cd'.repeat(95)}`,
  `00${'ab'.repeat(31)}`,
  `01${'ab'.repeat(12)}`,
  `01${'ab'.repeat(12)}${'cd'.repeat(33)}`,
  `01${'ab'.repeat(12)}${'cd'.repeat(34)}`,
  `01${'ab'.repeat(11)}`,
  `00${'AB'.repeat(32)}`,
  `00${'ab'.repeat(32)}a`,
  `02${'ab'.repeat(32)}`,
  '',
  '0',
  `0g${'ab'.repeat(32)}`,
  `00${'ab'.repeat(31)}aG`,
];
const arbCid = fc.constantFrom(...CIDS).map((s) => vfield(9, Buffer.from(s)));

/** Byte strings around the 32-byte native-check threshold, valid and invalid UTF-8. */
const BAD = [
  B(0xed, 0xa0, 0x80),
  B(0xc0, 0x80),
  B(0xf4, 0x90, 0x80, 0x80),
  B(0x80),
  B(0xe2, 0x82),
  B(0xef, 0xbf, 0xbd),
  B(0xe2, 0x82, 0xac),
  B(0xf0, 0x9f, 0x98, 0x80),
  B(0x00),
  B(0xef, 0xbb, 0xbf),
  B(0xc3, 0xa9),
  B(0xff),
];
const arbTextBytes = fc
  .tuple(
    fc.constantFrom(0, 1, 10, 11, 12, 13, 28, 29, 30, 31, 32, 33, 34, 60, 64),
    fc.constantFrom(...BAD),
    fc.nat(3),
  )
  .map(([pre, bad, post]) => concat(Buffer.from('x'.repeat(pre)), bad, Buffer.from('y'.repeat(post))));
const arbText = arbTextBytes.map(textBytes);

const arbParty = fc
  .constantFrom(`alice::1220${'ab'.repeat(32)}`, `bob::1220${'cd'.repeat(32)}`, 'al ice::12', '', 'a::b')
  .map((s) => vfield(7, Buffer.from(s)));

type Raw = Uint8Array;

/** Concatenates fields, maybe reversed (out of field-number order) or with one repeated. */
function fields(parts: Raw[], how: number): Raw {
  if (how === 1) return concat(...[...parts].reverse());
  if (how === 2 && parts.length > 0) return concat(...parts, parts[0]!);
  return concat(...parts);
}

const arbRawValue: fc.Arbitrary<Raw> = fc.letrec<{ value: Raw }>((tie) => {
  const v = tie('value') as fc.Arbitrary<Raw>;
  const how = fc.constantFrom(0, 0, 0, 0, 1, 2);
  const label = fc.oneof(
    fc.constantFrom('a', 'b', 'é', 'e\u0301', 'x'.repeat(33)).map((s) => Buffer.from(s) as Raw),
    arbTextBytes,
  );
  return {
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      arbInt64Wire,
      arbOddVarint,
      arbTimestamp,
      arbNumeric,
      arbCid,
      arbText,
      arbParty,
      fc.constant(vfield(1, B())),
      fc.tuple(fc.option(v), how).map(([x, h]) => vfield(10, x ? fields([vfield(1, x)], h) : B())),
      fc.array(v, { maxLength: 3 }).map((xs) => vfield(11, concat(...xs.map((x) => vfield(1, x))))),
      fc
        .array(fc.tuple(fc.option(label), v, how), { maxLength: 3 })
        .map((es) =>
          vfield(
            12,
            concat(
              ...es.map(([k, x, h]) => vfield(1, fields([...(k ? [vfield(1, k)] : []), vfield(2, x)], h))),
            ),
          ),
        ),
      fc
        .array(fc.tuple(v, v, how), { maxLength: 2 })
        .map((es) =>
          vfield(13, concat(...es.map(([k, x, h]) => vfield(1, fields([vfield(1, k), vfield(2, x)], h))))),
        ),
      fc
        .tuple(fc.boolean(), fc.array(fc.tuple(label, v, how), { maxLength: 3 }), how)
        .map(([id, fs, h]) =>
          vfield(
            14,
            fields(
              [
                ...(id ? [vfield(1, IDENT)] : []),
                ...fs.map(([l, x, h2]) => vfield(2, fields([vfield(1, l), vfield(2, x)], h2))),
              ],
              h,
            ),
          ),
        ),
      fc
        .tuple(fc.boolean(), label, v, how)
        .map(([id, c, x, h]) =>
          vfield(15, fields([...(id ? [vfield(1, IDENT)] : []), vfield(2, c), vfield(3, x)], h)),
        ),
      fc
        .tuple(fc.boolean(), label, how)
        .map(([id, c, h]) => vfield(16, fields([...(id ? [vfield(1, IDENT)] : []), vfield(2, c)], h))),
    ),
  };
}).value;

const arbDamage = fc.oneof(
  fc.constant((b: Raw) => b),
  fc.constant((b: Raw) => b),
  fc.tuple(fc.nat(), fc.integer({ min: 0, max: 7 })).map(([p, bit]) => (b: Raw) => {
    const c = Uint8Array.from(b);
    if (c.length) c[p % c.length]! ^= 1 << bit;
    return c;
  }),
  fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })).map(([p, x]) => (b: Raw) => {
    const at = b.length ? p % b.length : 0;
    return concat(b.subarray(0, at), B(x), b.subarray(at));
  }),
  fc
    .nat()
    .map(
      (p) => (b: Raw) => (b.length ? concat(b.subarray(0, p % b.length), b.subarray((p % b.length) + 1)) : b),
    ),
);

/** The first real vector with an exercise node, its chosen value replaced by the marker. */
function exerciseBase(): Uint8Array {
  const dir = join(VECTORS_DIR, 'real');
  for (const f of readdirSync(dir).sort()) {
    const v = JSON.parse(readFileSync(join(dir, f), 'utf8'));
    if (v.hashing_scheme_version !== 'HASHING_SCHEME_VERSION_V2') continue;
    const m = decodePreparedTransaction(Buffer.from(v.prepared_transaction_base64, 'base64'));
    const n = m.transaction.nodes.find((x) => x.node.type === 'exercise' && x.node.children.length > 0);
    if (n?.node.type !== 'exercise') continue;
    n.node.chosenValue = { kind: 'text', value: MARKER };
    return encodePreparedTransaction(m);
  }
  throw new Error('no vector with an exercise');
}

/** The first real vector with an input contract, its argument replaced by the marker. */
function inputContractBase(): Uint8Array {
  const dir = join(VECTORS_DIR, 'real');
  for (const f of readdirSync(dir).sort()) {
    const v = JSON.parse(readFileSync(join(dir, f), 'utf8'));
    if (v.hashing_scheme_version !== 'HASHING_SCHEME_VERSION_V2') continue;
    const m = decodePreparedTransaction(Buffer.from(v.prepared_transaction_base64, 'base64'));
    const ic = m.metadata.inputContracts[0];
    if (!ic) continue;
    ic.contract.argument = { kind: 'text', value: MARKER };
    return encodePreparedTransaction(m);
  }
  throw new Error('no vector with an input contract');
}

const SIZES = [0, 1, 31, 32, 33, 4096, 4097, 32767, 32768, 32769, 65525, 65531, 65532, 65536, 70000];

/** Lists of long texts and contract ids whose encodings straddle the sink's 64 KiB buffer. */
const arbLarge = fc
  .array(
    fc.oneof(
      fc.tuple(fc.constantFrom(...SIZES), fc.constantFrom('a', 'é', '😀')).map(([n, c]) => {
        const t = Buffer.from(c.repeat(Math.ceil(n / Buffer.byteLength(c)))).subarray(0, n);
        // keep it valid UTF-8: cut back to a character boundary
        let end = t.length;
        while (end > 0 && (t[end - 1]! & 0xc0) === 0x80) end--;
        if (end > 0 && t[end - 1]! >= 0xc0) end--;
        const cut = c === 'a' ? t : t.subarray(0, end);
        return textBytes(cut);
      }),
      fc.constantFrom(...CIDS.slice(0, 2), CIDS[4]!).map((s) => vfield(9, Buffer.from(s))),
      fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }).map((zz) => concat(tag(3, WT_VARINT), varint(zz))),
      arbTimestamp,
    ),
    { minLength: 1, maxLength: 8 },
  )
  .map((xs) => vfield(11, concat(...xs.map((x) => vfield(1, x)))));

describe('values from raw wire bytes: streaming hash = decode-then-hash', () => {
  for (const scheme of ['v2', 'v3'] as const) {
    it(`${scheme}: random raw values with damage (fixed seed)`, () => {
      accepted = 0;
      fc.assert(
        fc.property(arbRawValue, arbDamage, (raw, damage) => agree(damage(raw), scheme)),
        {
          seed: Number(process.env.FUZZ_SEED ?? 0x61747461) + (scheme === 'v3' ? 1 : 0),
          numRuns: Number(process.env.FUZZ_RUNS ?? 4000),
        },
      );
      expect(accepted).toBeGreaterThan(200);
    });
  }

  it('large values straddling the sink buffer, in a create and in an exercise with children (fixed seed)', () => {
    const ex = exerciseBase();
    fc.assert(
      fc.property(arbLarge, fc.constantFrom('v2', 'v3'), fc.boolean(), (raw, scheme, inExercise) => {
        accepted = 0;
        agree(raw, scheme as HashingScheme, inExercise ? ex : BASE);
        expect(accepted).toBe(1);
      }),
      { seed: 0x6c617267, numRuns: Number(process.env.FUZZ_LARGE_RUNS ?? 60) },
    );
  });

  it("random raw values in an exercise's chosen value and in an input contract's argument (fixed seed)", () => {
    const bases = [exerciseBase(), inputContractBase()];
    accepted = 0;
    fc.assert(
      fc.property(arbRawValue, arbDamage, fc.nat(3), (raw, damage, k) =>
        agree(damage(raw), k & 1 ? 'v3' : 'v2', bases[k >> 1]!),
      ),
      { seed: Number(process.env.FUZZ_SEED ?? 0x62617365), numRuns: Number(process.env.FUZZ_RUNS ?? 3000) },
    );
    expect(accepted).toBeGreaterThan(100);
  });
});
