/**
 * Every file of the shared vector folder (see ../shared/vectors/README.md):
 * 26 real transactions (V2 published hash, V3 Canton-Python reference hash),
 * the 2 Canton-derived transactions, the 17 Canton value encodings, and the
 * negative vector.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../src/hashing/decode.js';
import { encodePreparedTransaction, encodeValue } from '../src/hashing/encode.js';
import { base64ToBytes, bytesToHex, parseHash } from '../src/hashing/input.js';
import type { Identifier, Value } from '../src/hashing/model.js';
import { hashParts, hashPreparedTransaction } from '../src/hashing/transaction-hash.js';
import { encode, expectRefusal, singleCreateExpectedHash, singleCreateModel } from './support/fixtures.js';
import { lenField, replaceField } from './support/protobuf.js';
import { sha256 } from './support/spec-hash.js';
import { VECTORS_DIR as VECTORS } from './support/vectors.js';

interface TxVector {
  name: string;
  prepared_transaction_base64: string;
  expected_hash_hex: string;
  expected_hash_base64: string;
  reference_v3_hex?: string;
  reference_check?: { reproduced: boolean; reference_v2_hex: string; reference_v3_hex: string };
  sources: { also_expected?: { transaction_hash_hex: string; metadata_hash_hex: string } }[];
}

interface ValueVector {
  name: string;
  value_proto3_json: Json;
  value_proto_b64: string;
  expected_encoding_hex: string;
  expected_sha256_of_encoding: string;
}

type Json = string | number | boolean | null | Json[] | { [k: string]: Json };

function readJson<T>(...parts: string[]): T {
  return JSON.parse(readFileSync(join(VECTORS, ...parts), 'utf8')) as T;
}

const realFiles = readdirSync(join(VECTORS, 'real'))
  .filter((f) => f.endsWith('.json'))
  .sort();
const real = realFiles.map((f) => ({ file: f, v: readJson<TxVector>('real', f) }));

const hex = (b: Uint8Array) => bytesToHex(b);

describe('real transactions', () => {
  it('the folder holds exactly the 26 real vectors', () => {
    expect(readdirSync(join(VECTORS, 'real')).length).toBe(26);
    expect(real.length).toBe(26);
  });

  for (const { file, v } of real) {
    it(`${file}: V2 hash = published expected_hash_hex`, () => {
      expect(hex(hashPreparedTransaction(v.prepared_transaction_base64, { scheme: 'v2' }))).toBe(
        v.expected_hash_hex,
      );
    });
    it(`${file}: V3 hash = Canton reference_v3_hex`, () => {
      expect(v.reference_v3_hex).toMatch(/^[0-9a-f]{64}$/);
      expect(hex(hashPreparedTransaction(v.prepared_transaction_base64, { scheme: 'v3' }))).toBe(
        v.reference_v3_hex,
      );
    });
  }

  it('every published base64 hash is the same 32 bytes as its hex form', () => {
    for (const { v } of real) expect(hex(parseHash(v.expected_hash_base64))).toBe(v.expected_hash_hex);
  });

  it('the default scheme is V2 and bytes input equals base64 input', () => {
    for (const { v } of real) {
      const bytes = base64ToBytes(v.prepared_transaction_base64);
      expect(hex(hashPreparedTransaction(bytes))).toBe(v.expected_hash_hex);
    }
  });

  it('a decoded real vector re-encoded with encodePreparedTransaction gives the same V2 and V3 hashes', () => {
    for (const { v } of real) {
      const decoded = decodePreparedTransaction(v.prepared_transaction_base64);
      const reencoded = encodePreparedTransaction(decoded);
      expect(hex(hashPreparedTransaction(reencoded, { scheme: 'v2' })), v.name).toBe(v.expected_hash_hex);
      expect(hex(hashPreparedTransaction(reencoded, { scheme: 'v3' })), v.name).toBe(v.reference_v3_hex);
    }
  });

  // The cordialsys capture was re-serialised by a Go client: its InputContract
  // writes created_at (1000) and event_blob (1002) before the v1 oneof (1).
  // Valid protobuf, same hash, but not the Java runtime's field-number order.
  const NOT_FIELD_ORDER = new Set(['v2_cordialsys_crosschain_live_create_account_accept.json']);

  it('the canonical encoder reproduces the participant bytes exactly (Java field order)', () => {
    for (const { file, v } of real) {
      const original = base64ToBytes(v.prepared_transaction_base64);
      const reencoded = encodePreparedTransaction(decodePreparedTransaction(original));
      if (NOT_FIELD_ORDER.has(file)) {
        expect(reencoded.length, v.name).toBe(original.length);
        expect(hex(reencoded), v.name).not.toBe(hex(original));
      } else expect(hex(reencoded), v.name).toBe(hex(original));
    }
  });

  it('hashing a DecodedTransaction equals hashing its bytes', () => {
    const { v } = real[0]!;
    const decoded = decodePreparedTransaction(v.prepared_transaction_base64);
    expect(hex(hashPreparedTransaction(decoded, { scheme: 'v2' }))).toBe(v.expected_hash_hex);
    expect(hex(hashPreparedTransaction(decoded, { scheme: 'v3' }))).toBe(v.reference_v3_hex);
  });
});

describe('derived Canton transactions (shared nodes: test-only decode option)', () => {
  const v2 = readJson<TxVector>('derived', 'v2_canton_scala_basenodehashtest_full_transaction_v2.json');
  const v3 = readJson<TxVector>('derived', 'v3_canton_scala_basenodehashtest_full_transaction_v3.json');
  const lenient = { unsafeAllowNonTreeForTests: true } as const;

  it('the derived folder holds the 2 transactions and the value encodings', () => {
    expect(readdirSync(join(VECTORS, 'derived')).sort()).toEqual([
      'v2_canton_scala_basenodehashtest_full_transaction_v2.json',
      'v3_canton_scala_basenodehashtest_full_transaction_v3.json',
      'value_encodings_from_canton_ValueHashTest.json',
    ]);
  });

  it('V2 transaction under V2 = Scala expected hash, with the Scala transaction and metadata hashes', () => {
    const parts = hashParts(v2.prepared_transaction_base64, { ...lenient, scheme: 'v2' });
    expect(hex(parts.hash)).toBe(v2.expected_hash_hex);
    const also = v2.sources[0]!.also_expected!;
    expect(hex(parts.transactionHash)).toBe(also.transaction_hash_hex);
    expect(hex(parts.metadataHash)).toBe(also.metadata_hash_hex);
  });

  it('V2 transaction under V3 = Canton reference V3 hash', () => {
    expect(hex(hashPreparedTransaction(v2.prepared_transaction_base64, { ...lenient, scheme: 'v3' }))).toBe(
      v2.reference_check!.reference_v3_hex,
    );
  });

  it('V3 transaction (contract keys, QueryByKey) under V3 = Scala expected hash', () => {
    const parts = hashParts(v3.prepared_transaction_base64, { ...lenient, scheme: 'v3' });
    expect(hex(parts.hash)).toBe(v3.expected_hash_hex);
    const also = v3.sources[0]!.also_expected!;
    expect(hex(parts.transactionHash)).toBe(also.transaction_hash_hex);
    expect(hex(parts.metadataHash)).toBe(also.metadata_hash_hex);
  });

  it('V3 transaction under V2 is refused (LF "2" / contract keys need V3)', () => {
    expectRefusal(
      () => hashPreparedTransaction(v3.prepared_transaction_base64, { ...lenient, scheme: 'v2' }),
      'unsupported_version',
      'transaction.version',
    );
  });

  it('without the test-only option both are refused as non-trees', () => {
    for (const v of [v2, v3]) {
      for (const scheme of ['v2', 'v3'] as const) {
        expectRefusal(
          () => hashPreparedTransaction(v.prepared_transaction_base64, { scheme }),
          'shared_node',
          'transaction.nodes[4].v1.exercise.children[0]',
        );
      }
      // node 0 is a root and also the first child of exercise node 4
      expectRefusal(
        () => decodePreparedTransaction(v.prepared_transaction_base64),
        'shared_node',
        'transaction.nodes[4].v1.exercise.children[0]',
      );
    }
  });
});

// ---- value encodings ----------------------------------------------------------

function obj(j: Json | undefined, what: string): { [k: string]: Json } {
  if (j === null || typeof j !== 'object' || Array.isArray(j)) throw new Error(`${what}: expected an object`);
  return j;
}

function arr(j: Json | undefined): Json[] {
  if (j === undefined) return [];
  if (!Array.isArray(j)) throw new Error('expected an array');
  return j;
}

function s(j: Json | undefined): string {
  if (typeof j !== 'string') throw new Error('expected a string');
  return j;
}

/** Reads a property by name (also `constructor`, which TypeScript types as Object's own). */
function get(o: { [k: string]: Json }, k: string): Json | undefined {
  return Object.hasOwn(o, k) ? o[k] : undefined;
}

function ident(j: Json | undefined): Identifier | undefined {
  if (j === undefined) return undefined;
  const o = obj(j, 'identifier');
  return { packageId: s(o.packageId), moduleName: s(o.moduleName), entityName: s(o.entityName) };
}

/** proto3 JSON of com.daml.ledger.api.v2.Value → the model's Value. */
function fromProto3Json(j: Json): Value {
  const o = obj(j, 'value');
  const keys = Object.keys(o);
  if (keys.length !== 1) throw new Error(`value must set exactly one variant, got ${keys.join(',')}`);
  const k = keys[0]!;
  const x = o[k]!;
  switch (k) {
    case 'unit':
      return { kind: 'unit' };
    case 'bool':
      if (typeof x !== 'boolean') throw new Error('bool');
      return { kind: 'bool', value: x };
    case 'int64':
      return { kind: 'int64', value: BigInt(s(x)) };
    case 'numeric':
      return { kind: 'numeric', value: s(x) };
    case 'timestamp':
      return { kind: 'timestamp', value: BigInt(s(x)) };
    case 'date':
      if (typeof x !== 'number') throw new Error('date');
      return { kind: 'date', value: x };
    case 'party':
      return { kind: 'party', value: s(x) };
    case 'text':
      return { kind: 'text', value: s(x) };
    case 'contractId':
      return { kind: 'contractId', value: s(x) };
    case 'optional': {
      const inner = obj(x, 'optional').value;
      return { kind: 'optional', value: inner === undefined ? undefined : fromProto3Json(inner) };
    }
    case 'list':
      return { kind: 'list', elements: arr(obj(x, 'list').elements).map(fromProto3Json) };
    case 'textMap':
      return {
        kind: 'textMap',
        entries: arr(obj(x, 'textMap').entries).map((e) => {
          const eo = obj(e, 'entry');
          return { key: s(eo.key), value: fromProto3Json(eo.value!) };
        }),
      };
    case 'genMap':
      return {
        kind: 'genMap',
        entries: arr(obj(x, 'genMap').entries).map((e) => {
          const eo = obj(e, 'entry');
          return { key: fromProto3Json(eo.key!), value: fromProto3Json(eo.value!) };
        }),
      };
    case 'record': {
      const r = obj(x, 'record');
      return {
        kind: 'record',
        recordId: ident(r.recordId),
        fields: arr(r.fields).map((f) => {
          const fo = obj(f, 'field');
          return { label: s(fo.label), value: fromProto3Json(fo.value!) };
        }),
      };
    }
    case 'variant': {
      const r = obj(x, 'variant');
      return {
        kind: 'variant',
        variantId: ident(r.variantId),
        constructor: s(get(r, 'constructor')),
        value: fromProto3Json(r.value!),
      };
    }
    case 'enum': {
      const r = obj(x, 'enum');
      return { kind: 'enum', enumId: ident(r.enumId), constructor: s(get(r, 'constructor')) };
    }
    default:
      throw new Error(`unknown value variant ${k}`);
  }
}

describe('Canton ValueHashTest encodings (17)', () => {
  const values = readJson<ValueVector[]>('derived', 'value_encodings_from_canton_ValueHashTest.json');

  it('there are exactly 17 value vectors', () => {
    expect(values.length).toBe(17);
  });

  for (const v of values) {
    const encoding = Buffer.from(v.expected_encoding_hex, 'hex');
    const value = fromProto3Json(v.value_proto3_json);

    it(`${v.name}: expected_sha256_of_encoding = SHA-256(expected_encoding_hex)`, () => {
      expect(sha256(encoding).toString('hex')).toBe(v.expected_sha256_of_encoding);
    });

    it(`${v.name}: encodeValue(proto3 JSON) = Canton's value_proto_b64`, () => {
      expect(hex(encodeValue(value))).toBe(hex(base64ToBytes(v.value_proto_b64)));
    });

    it(`${v.name}: hash of a one-create transaction = hand-built hash with Canton's encoding spliced in`, () => {
      const bytes = encode(singleCreateModel(value));
      for (const scheme of ['v2', 'v3'] as const) {
        expect(hex(hashPreparedTransaction(bytes, { scheme })), scheme).toBe(
          singleCreateExpectedHash(scheme, encoding).toString('hex'),
        );
      }
    });

    it(`${v.name}: Canton's own value bytes decoded as the create argument hash the same`, () => {
      const base = encode(singleCreateModel({ kind: 'unit' }));
      // transaction(1) → nodes(3) → v1(1000) → create(1) → argument(5)
      const spliced = replaceField(
        base,
        [
          [1, 0],
          [3, 0],
          [1000, 0],
          [1, 0],
        ],
        [5, 0],
        lenField(5, base64ToBytes(v.value_proto_b64)),
      );
      expect(hex(hashPreparedTransaction(spliced, { scheme: 'v2' }))).toBe(
        singleCreateExpectedHash('v2', encoding).toString('hex'),
      );
    });
  }
});

describe('negative vector', () => {
  const files = readdirSync(join(VECTORS, 'negative'));
  const v = readJson<TxVector>('negative', 'v2_bitgo_invalidonesteppreapprovalprepareresponse.json');

  it('the negative folder holds exactly one vector', () => {
    expect(files).toEqual(['v2_bitgo_invalidonesteppreapprovalprepareresponse.json']);
  });

  it('its hash does NOT match the deliberately wrong expected hash', () => {
    const h = hex(hashPreparedTransaction(v.prepared_transaction_base64, { scheme: 'v2' }));
    expect(h).not.toBe(v.expected_hash_hex);
    expect(h).toBe(v.reference_check!.reference_v2_hex);
  });

  it('its wrong base64 hash is not even canonical base64 (non-zero padding bits)', () => {
    expectRefusal(() => parseHash(v.expected_hash_base64), 'bad_encoding', '');
  });
});
