/**
 * Field-level edits of protobuf messages for the hashing differentials: the
 * payloads on both sides of every node-level and UTF-8 rule, and changes that
 * keep a message well formed (fields reordered, repeated, dropped, added,
 * given another payload) or break it on purpose (wire types, non-canonical
 * varints, damaged bytes).
 */
import fc from 'fast-check';
import { ALICE, BOB } from './fixtures.js';
import { concat, parseFields, tag, varint, WT_I64, WT_LEN, WT_VARINT } from './protobuf.js';

const enc = (s: string) => new TextEncoder().encode(s);
const hex = (n: number, seed = 'a1') => seed.repeat(n).slice(0, 2 * n);
const bytes = (...b: number[]) => Uint8Array.from(b);

/** Payloads on both sides of the node-level rules and of UTF-8's, for any length-delimited field. */
export const EDGE_PAYLOADS: Uint8Array[] = [
  enc('2.1'),
  enc('2'),
  enc('2.1 '),
  enc('2.1\0'),
  enc('２.1'),
  bytes(0x32, 0x2e, 0xb1),
  enc(''),
  enc('splice-amulet'),
  enc('Splice_Amulet-0'),
  enc('splice-amulét'),
  enc('x'.repeat(255)),
  enc('x'.repeat(256)),
  enc('é'.repeat(128)),
  enc(`00${hex(32)}`),
  enc(`00${hex(126)}`),
  enc(`00${hex(127)}`),
  enc(`01${hex(12)}`),
  enc(`01${hex(46)}`),
  enc(`00${hex(32, 'A1')}`),
  enc(ALICE),
  enc(BOB),
  enc('a b:c-d_e'),
  enc('p'.repeat(255)),
  enc('p'.repeat(256)),
  enc('alice!'),
  enc('Transfer'),
  enc('ünïcödé 😀'),
  enc('\uFEFFTransfer'),
  enc('\uFFFD'),
  enc('Splice.Amulet'),
  enc('d'.repeat(64)),
  enc('d'.repeat(65)),
  enc('2.2'),
  enc('2.10'),
  enc('bad name'),
  enc('é'),
  enc(`00${hex(31)}`),
  enc(`01${hex(45)}`),
  enc(`00${hex(32)}a`),
  enc(`02${hex(32)}`),
  enc(`alice::1220${hex(32)}`),
  enc(`bob::1220${hex(32)}`),
  bytes(0xff, 0x41),
  bytes(0xef, 0xbb, 0xbf, 0x41),
  // invalid UTF-8: truncated, lone continuation, overlongs, surrogates, above U+10FFFF
  bytes(0xc3),
  bytes(0x41, 0xe2, 0x82),
  bytes(0x80),
  bytes(0xc0, 0x80),
  bytes(0xc1, 0xbf),
  bytes(0xe0, 0x80, 0x80),
  bytes(0xe0, 0x9f, 0xbf),
  bytes(0xf0, 0x80, 0x80, 0x80),
  bytes(0xf0, 0x8f, 0xbf, 0xbf),
  bytes(0xed, 0xa0, 0x80),
  bytes(0xed, 0xbf, 0xbf),
  bytes(0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80),
  bytes(0xf4, 0x90, 0x80, 0x80),
  bytes(0xf8, 0x88, 0x80, 0x80, 0x80),
  bytes(0xff),
  // the same with a long ASCII prefix (the native check runs on more than 32 bytes)
  concat(enc('x'.repeat(40)), bytes(0xed, 0xa0, 0x80)),
  concat(enc('x'.repeat(40)), bytes(0xe0, 0x80, 0x80)),
  concat(enc('x'.repeat(40)), bytes(0xe2, 0x82)),
  concat(enc('x'.repeat(40)), bytes(0xf4, 0x90, 0x80, 0x80)),
  concat(enc('x'.repeat(40)), bytes(0xef, 0xbf, 0xbd)),
];

/** A change of one message's bytes. */
export type FieldEdit = (body: Uint8Array) => Uint8Array;

/** Field-level changes of a message (each keeps it a well-formed message, or breaks it on purpose). */
export const arbFieldEdit: fc.Arbitrary<FieldEdit> = fc.oneof(
  // a permutation of the fields (valid protobuf, out of field-number order)
  fc.array(fc.nat(), { minLength: 1, maxLength: 20 }).map((keys) => (body: Uint8Array) => {
    const fields = parseFields(body);
    const order = fields.map((f, i) => ({ f, k: keys[i % keys.length]! + i * 0.001 }));
    order.sort((a, b) => a.k - b.k);
    return concat(...order.map(({ f }) => body.subarray(f.start, f.end)));
  }),
  // two fields swapped
  fc.tuple(fc.nat(), fc.nat()).map(([a, b]) => (body: Uint8Array) => {
    const fields = parseFields(body);
    if (fields.length < 2) return body;
    const i = a % fields.length;
    const j = b % fields.length;
    const parts = fields.map((f) => body.subarray(f.start, f.end));
    [parts[i], parts[j]] = [parts[j]!, parts[i]!];
    return concat(...parts);
  }),
  // a field repeated
  fc.nat().map((a) => (body: Uint8Array) => {
    const fields = parseFields(body);
    const f = fields[a % Math.max(1, fields.length)];
    return f ? concat(body, body.subarray(f.start, f.end)) : body;
  }),
  // a field dropped
  fc.nat().map((a) => (body: Uint8Array) => {
    const fields = parseFields(body);
    const f = fields[a % Math.max(1, fields.length)];
    return f ? concat(body.subarray(0, f.start), body.subarray(f.end)) : body;
  }),
  // a length-delimited field given an edge-case payload
  fc.tuple(fc.nat(), fc.nat()).map(([a, p]) => (body: Uint8Array) => {
    const fields = parseFields(body).filter((f) => f.wireType === WT_LEN);
    const f = fields[a % Math.max(1, fields.length)];
    if (!f) return body;
    const payload = EDGE_PAYLOADS[p % EDGE_PAYLOADS.length]!;
    return concat(
      body.subarray(0, f.start),
      tag(f.field, WT_LEN),
      varint(payload.length),
      payload,
      body.subarray(f.end),
    );
  }),
  // a new field: any number 1-18, with an edge-case payload or a varint
  fc
    .tuple(fc.integer({ min: 1, max: 18 }), fc.nat(), fc.boolean())
    .map(([field, p, len]) => (body: Uint8Array) => {
      const payload = EDGE_PAYLOADS[p % EDGE_PAYLOADS.length]!;
      const extra = len
        ? concat(tag(field, WT_LEN), varint(payload.length), payload)
        : concat(tag(field, WT_VARINT), varint(p % 3));
      return concat(body, extra);
    }),
  // a field's wire type changed (its payload left as it was)
  fc.tuple(fc.nat(), fc.constantFrom(WT_VARINT, WT_I64, WT_LEN)).map(([a, wt]) => (body: Uint8Array) => {
    const fields = parseFields(body);
    const f = fields[a % Math.max(1, fields.length)];
    if (!f) return body;
    const t = tag(f.field, wt);
    const oldTagEnd = f.start + tag(f.field, f.wireType).length;
    return concat(body.subarray(0, f.start), t, body.subarray(oldTagEnd));
  }),
  // byte damage inside the body
  fc
    .array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 7 })), { minLength: 1, maxLength: 2 })
    .map((flips) => (body: Uint8Array) => {
      const c = Uint8Array.from(body);
      if (c.length === 0) return c;
      for (const [pos, bit] of flips) c[pos % c.length]! ^= 1 << bit;
      return c;
    }),
  // a varint field made non-canonical (a redundant continuation byte)
  fc.nat().map((a) => (body: Uint8Array) => {
    const fields = parseFields(body).filter((f) => f.wireType === WT_VARINT);
    const f = fields[a % Math.max(1, fields.length)];
    if (!f) return body;
    const t = tag(f.field, WT_VARINT);
    const v = body.subarray(f.start + t.length, f.end);
    const longer = concat(v.subarray(0, v.length - 1), [v[v.length - 1]! | 0x80, 0x00]);
    return concat(body.subarray(0, f.start), t, longer, body.subarray(f.end));
  }),
  // one byte of a text payload changed (keeps the length)
  fc.tuple(fc.nat(), fc.nat(), fc.nat({ max: 255 })).map(([a, i, v]) => (body: Uint8Array) => {
    const fields = parseFields(body).filter((f) => f.wireType === WT_LEN && f.end > f.payloadStart);
    const f = fields[a % Math.max(1, fields.length)];
    if (!f) return body;
    const c = Uint8Array.from(body);
    c[f.payloadStart + (i % (f.end - f.payloadStart))] = v;
    return c;
  }),
);
