/**
 * Daml values and contract keys. One walker reads a protobuf `Value` straight
 * from the wire bytes, recursively (bounded by MAX_VALUE_DEPTH), and applies
 * every rule — canonical numerics and contract ids, text-map keys in ascending
 * UTF-8 order (raw byte order), record fields with non-empty, unique labels,
 * valid UTF-8, identifiers and parties through the shared caches, no unknown
 * field — while it hands what it reads to a consumer: `MODEL` builds the
 * `Value` objects of the decoded model; the hasher's consumer writes Canton's
 * value encoding straight into its SHA-256 sink. Consumers only build or
 * encode: no rule is theirs. Also global keys, with their 32-byte hash and
 * sorted maintainers.
 */
import { compareBytes, numericBytesProblem } from './canonical.js';
import { FieldDecoder, truncate } from './decode-fields.js';
import type { GlobalKey, GlobalKeyWithMaintainers, Identifier, Value } from './model.js';
import { type WireReader, WT_I64, WT_LEN, WT_VARINT } from './wire.js';

/**
 * Daml limits value nesting to 100 (`MAXIMUM_NESTING`), counted as Daml does:
 * a top-level value (an argument, a chosen value, a result, a key) is at
 * nesting 0 and each list element, optional, record field, variant, map entry
 * one deeper, so 100 wrappers around a leaf are accepted and 101 refused —
 * before they can exhaust the stack.
 */
export const MAX_VALUE_DEPTH = 100;

export abstract class ValueDecoder extends FieldDecoder {
  protected keyField(tag: number, end: number, name: string): GlobalKeyWithMaintainers {
    const stop = this.enter(tag, end, name);
    let key: GlobalKey | undefined;
    const maintainers: string[] = [];
    let seen = 0;
    while (this.r.pos < stop) {
      const t = this.r.tag(stop);
      const f = t >>> 3;
      if (f === 1) {
        seen = this.once(seen, f, 'key');
        const s2 = this.enter(t, stop, 'key');
        key = this.globalKey(s2);
        this.leave(s2);
      } else if (f === 2) {
        maintainers.push(this.party(t, stop, 'maintainers', maintainers.length));
      } else this.unknown(t);
    }
    if (!key) this.p.fail('missing_field', 'key with maintainers has no key', 'key');
    this.sortedSet(maintainers, 'maintainers');
    this.leave(stop);
    return { key, maintainers };
  }

  protected globalKey(end: number): GlobalKey {
    let templateId: Identifier | undefined;
    let packageName = '';
    let key: Value | undefined;
    let hash: Uint8Array | undefined;
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      switch (f) {
        case 1:
          seen = this.once(seen, f, 'template_id');
          templateId = this.identifierField(tag, end, 'template_id');
          break;
        case 2:
          seen = this.once(seen, f, 'package_name');
          packageName = this.packageName(tag, end);
          break;
        case 3: {
          seen = this.once(seen, f, 'key');
          const stop = this.enter(tag, end, 'key');
          key = this.value(stop, 0);
          this.leave(stop);
          break;
        }
        case 4:
          seen = this.once(seen, f, 'hash');
          this.r.expect(tag, WT_LEN, 'hash');
          this.p.push('hash');
          hash = this.r.bytes(end);
          this.p.pop();
          break;
        default:
          this.unknown(tag);
      }
    }
    if (!templateId) this.p.fail('missing_field', 'global key has no template id', 'template_id');
    if (!key) this.p.fail('missing_field', 'global key has no key value', 'key');
    if (hash?.length !== 32)
      this.p.fail('non_canonical', `global key hash must be 32 bytes (got ${hash?.length ?? 0})`, 'hash');
    return { templateId, packageName, key, hash };
  }

  /**
   * Set by the streaming hasher's decode: the top-level values of nodes and input contracts
   * (arguments, chosen values, results) are only delimited (`WireValue`) and walked later, once,
   * straight into the hash. Contract keys are always decoded into the model.
   */
  deferValues = false;
  /** Values delimited and values walked since, so that none is left unchecked. */
  deferred = 0;
  walked = 0;

  /** A node's top-level value field: decoded, or delimited when values are deferred. */
  protected topValue(tag: number, end: number, name: string): Value {
    const stop = this.enter(tag, end, name);
    let v: Value;
    if (this.deferValues) {
      v = new WireValue(this.r.pos, stop) as unknown as Value;
      this.deferred++;
      this.r.pos = stop;
    } else v = this.value(stop, 0);
    this.leave(stop);
    return v;
  }

  /** Walks a delimited value (from `topValue`) into `c`, with every check, wherever the reader is. */
  walkDeferred<V>(w: WireValue, c: ValueConsumer<V>): V {
    const pos = this.r.pos;
    this.r.pos = w.start;
    const v = this.walk(w.stop, 0, c);
    this.r.pos = pos;
    this.walked++;
    return v;
  }

  // ---- values (recursive, bounded by MAX_VALUE_DEPTH; a top-level value is depth 0) ----

  protected value(end: number, depth: number): Value {
    return this.walk(end, depth, MODEL);
  }

  protected walk<V>(end: number, depth: number, c: ValueConsumer<V>): V {
    if (depth > MAX_VALUE_DEPTH)
      this.p.fail('too_deep', `value nesting exceeds the Daml limit of ${MAX_VALUE_DEPTH}`);
    let v: V | undefined;
    let set = false;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      if (f < 1 || f > 16) this.unknown(tag);
      if (set) this.p.fail('duplicate_field', 'value oneof set more than once', VALUE_NAMES[f]);
      v = this.walkSum(tag, f, end, depth, c);
      set = true;
    }
    if (!set) this.p.fail('missing_field', 'value has no variant set (sum oneof is empty)');
    return v as V;
  }

  protected walkSum<V>(tag: number, f: number, end: number, depth: number, c: ValueConsumer<V>): V {
    const r = this.r;
    switch (f) {
      case 1: {
        const stop = this.enter(tag, end, 'unit');
        if (r.pos < stop) this.unknown(r.tag(stop));
        this.leave(stop);
        return c.unit();
      }
      case 2:
        return c.bool(this.bool(tag, end, 'bool'));
      case 3: {
        r.expect(tag, WT_VARINT, 'int64');
        // ZigZag-encoded: the consumer reads the 64 bits as two words (low returned, high in `r.hi`).
        return c.int64(r.varint64Words(end, 'int64'), r.hi);
      }
      case 4:
        return c.date(this.int32(tag, end, 'date'));
      case 5:
        r.expect(tag, WT_I64, 'timestamp');
        return c.timestamp(r, r.fixed64(end));
      case 6: {
        const start = r.span(tag, end, 'numeric');
        const bad = numericBytesProblem(r.buf, start, r.pos);
        if (bad) {
          if (!r.isUtf8(start, r.pos)) r.failUtf8(start, 'numeric');
          this.p.fail(
            'non_canonical',
            `numeric ${JSON.stringify(truncate(r.utf8(start, r.pos)))} ${bad}`,
            'numeric',
          );
        }
        return c.text(r, start, r.pos, 'numeric');
      }
      case 7: {
        const p = this.party(tag, end, 'party');
        return c.party(p, r, this.partyAt, r.pos);
      }
      case 8: {
        const start = this.utf8Span(tag, end, 'text');
        return c.text(r, start, r.pos, 'text');
      }
      case 9: {
        const start = this.contractIdSpan(tag, end, 'contract_id');
        return c.contractId(r, start, r.pos);
      }
      case 10: {
        const stop = this.enter(tag, end, 'optional');
        c.optionalStart(r.pos < stop);
        let inner: V | undefined;
        let has = false;
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t >>> 3 !== 1) this.unknown(t);
          if (has) this.p.fail('duplicate_field', 'singular field occurs more than once', 'value');
          const s2 = this.enter(t, stop, 'value');
          inner = this.walk(s2, depth + 1, c);
          has = true;
          this.leave(s2);
        }
        this.leave(stop);
        return c.optional(inner);
      }
      case 11: {
        const stop = this.enter(tag, end, 'list');
        const acc = c.listStart(r, r.pos, stop);
        let i = 0;
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t >>> 3 !== 1) this.unknown(t);
          const s2 = this.enter(t, stop, 'elements', i);
          c.listItem(acc, this.walk(s2, depth + 1, c));
          this.leave(s2, i++);
        }
        this.leave(stop);
        return c.list(acc);
      }
      case 12:
        return this.textMap(tag, end, depth, c);
      case 13: {
        const stop = this.enter(tag, end, 'gen_map');
        const acc = c.genMapStart(r, r.pos, stop);
        let i = 0;
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t >>> 3 !== 1) this.unknown(t);
          const s2 = this.enter(t, stop, 'entries', i);
          let key: V | undefined;
          let value: V | undefined;
          let seen = 0;
          while (r.pos < s2) {
            const t2 = r.tag(s2);
            const f2 = t2 >>> 3;
            if (f2 !== 1 && f2 !== 2) this.unknown(t2);
            const name = f2 === 1 ? 'key' : 'value';
            if (f2 === 1 && seen !== 0) c.unordered();
            seen = this.once(seen, f2, name);
            const s3 = this.enter(t2, s2, name);
            const v = this.walk(s3, depth + 1, c);
            this.leave(s3);
            if (f2 === 1) key = v;
            else value = v;
          }
          if (!(seen & 2)) this.p.fail('missing_field', 'gen-map entry has no key', 'key');
          if (!(seen & 4)) this.p.fail('missing_field', 'gen-map entry has no value', 'value');
          c.genMapEntry(acc, key as V, value as V);
          this.leave(s2, i++);
        }
        this.leave(stop);
        return c.genMap(acc);
      }
      case 14:
        return this.record(tag, end, depth, c);
      case 15: {
        const stop = this.enter(tag, end, 'variant');
        const acc = c.variantStart(r, r.pos, stop);
        let ctorStart = 0;
        let ctorStop = 0;
        let value: V | undefined;
        let seen = 0;
        while (r.pos < stop) {
          const t = r.tag(stop);
          const f2 = t >>> 3;
          if (seen >>> (f2 + 1) !== 0) c.unordered();
          if (f2 === 1) {
            seen = this.once(seen, 1, 'variant_id');
            c.variantId(acc, this.identifierField(t, stop, 'variant_id'));
          } else if (f2 === 2) {
            seen = this.once(seen, 2, 'constructor');
            ctorStart = this.utf8Span(t, stop, 'constructor');
            ctorStop = r.pos;
            c.constructorName(acc, r, ctorStart, ctorStop);
          } else if (f2 === 3) {
            seen = this.once(seen, 3, 'value');
            const s2 = this.enter(t, stop, 'value');
            value = this.walk(s2, depth + 1, c);
            this.leave(s2);
          } else this.unknown(t);
        }
        if (ctorStop === ctorStart) this.p.fail('missing_field', 'variant has no constructor', 'constructor');
        if (!(seen & 8)) this.p.fail('missing_field', 'variant has no value', 'value');
        this.leave(stop);
        return c.variant(acc, r, ctorStart, ctorStop, value as V);
      }
      default: {
        const stop = this.enter(tag, end, 'enum');
        const acc = c.enumStart(r, r.pos, stop);
        let ctorStart = 0;
        let ctorStop = 0;
        let seen = 0;
        while (r.pos < stop) {
          const t = r.tag(stop);
          const f2 = t >>> 3;
          if (seen >>> (f2 + 1) !== 0) c.unordered();
          if (f2 === 1) {
            seen = this.once(seen, 1, 'enum_id');
            c.enumId(acc, this.identifierField(t, stop, 'enum_id'));
          } else if (f2 === 2) {
            seen = this.once(seen, 2, 'constructor');
            ctorStart = this.utf8Span(t, stop, 'constructor');
            ctorStop = r.pos;
            c.constructorName(acc, r, ctorStart, ctorStop);
          } else this.unknown(t);
        }
        if (ctorStop === ctorStart) this.p.fail('missing_field', 'enum has no constructor', 'constructor');
        this.leave(stop);
        return c.enum(acc, r, ctorStart, ctorStop);
      }
    }
  }

  private textMap<V>(tag: number, end: number, depth: number, c: ValueConsumer<V>): V {
    const r = this.r;
    const stop = this.enter(tag, end, 'text_map');
    const acc = c.textMapStart(r, r.pos, stop);
    let prevStart = 0;
    let prevStop = 0;
    let i = 0;
    while (r.pos < stop) {
      const t = r.tag(stop);
      if (t >>> 3 !== 1) this.unknown(t);
      const s2 = this.enter(t, stop, 'entries', i);
      let keyStart = 0;
      let keyStop = 0;
      let value: V | undefined;
      let seen = 0;
      while (r.pos < s2) {
        const t2 = r.tag(s2);
        const f2 = t2 >>> 3;
        if (f2 === 1) {
          if (seen !== 0) c.unordered();
          seen = this.once(seen, 1, 'key');
          keyStart = this.utf8Span(t2, s2, 'key');
          keyStop = r.pos;
          c.textMapKey(acc, r, keyStart, keyStop);
        } else if (f2 === 2) {
          seen = this.once(seen, 2, 'value');
          c.textMapValueStart(acc, seen & 2);
          const s3 = this.enter(t2, s2, 'value');
          value = this.walk(s3, depth + 1, c);
          this.leave(s3);
        } else this.unknown(t2);
      }
      if (!(seen & 4)) this.p.fail('missing_field', 'text-map entry has no value', 'value');
      if (i > 0) {
        const d = compareBytes(r.buf, prevStart, prevStop, keyStart, keyStop);
        if (d === 0)
          this.p.fail(
            'duplicate',
            `text-map key ${JSON.stringify(truncate(r.utf8(keyStart, keyStop)))} appears twice`,
            'key',
          );
        if (d > 0) this.p.fail('unsorted', 'text-map keys are not in ascending UTF-8 order', 'key');
      }
      c.textMapEntry(acc, r, keyStart, keyStop, value as V);
      prevStart = keyStart;
      prevStop = keyStop;
      this.leave(s2, i++);
    }
    this.leave(stop);
    return c.textMap(acc);
  }

  /** Label spans of the records being walked, one scratch list per depth (reused). */
  private readonly labelSpans: number[][] = [];

  private record<V>(tag: number, end: number, depth: number, c: ValueConsumer<V>): V {
    const r = this.r;
    const stop = this.enter(tag, end, 'record');
    const acc = c.recordStart(r, r.pos, stop);
    let spans = this.labelSpans[depth];
    if (spans === undefined) {
      spans = [];
      this.labelSpans[depth] = spans;
    }
    let seen = 0;
    let i = 0;
    while (r.pos < stop) {
      const t = r.tag(stop);
      const f2 = t >>> 3;
      if (f2 === 1) {
        if (i > 0) c.unordered();
        seen = this.once(seen, 1, 'record_id');
        c.recordId(acc, this.identifierField(t, stop, 'record_id'));
      } else if (f2 === 2) {
        const s2 = this.enter(t, stop, 'fields', i);
        this.recordField(s2, depth, acc, spans, 2 * i, c);
        this.leave(s2, i++);
      } else this.unknown(t);
    }
    this.uniqueLabels(spans, i);
    this.leave(stop);
    return c.record(acc);
  }

  /**
   * Daml records never repeat a field. Canton would hash a repeated label, but every reader of the
   * model finds fields by label (the inspect JSON keeps one value per label, the recogniser the
   * first): a repeat would hide a hashed field from the person signing (docs/hashing.md).
   * `spans` holds each label's start and end in the wire bytes; equal bytes are equal labels.
   */
  private uniqueLabels(spans: number[], n: number): void {
    if (n < 2) return;
    const r = this.r;
    const b = r.buf;
    if (n <= 16) {
      for (let i = 1; i < n; i++) {
        const s = spans[2 * i]!;
        const e = spans[2 * i + 1]!;
        for (let j = 0; j < i; j++) {
          const s2 = spans[2 * j]!;
          if (
            spans[2 * j + 1]! - s2 === e - s &&
            b[s2] === b[s] &&
            compareBytes(b, s2, s2 + e - s, s, e) === 0
          )
            this.repeatedLabel(spans, i);
        }
      }
      return;
    }
    const seen = new Set<string>();
    for (let i = 0; i < n; i++) {
      const label = r.utf8(spans[2 * i]!, spans[2 * i + 1]!);
      if (seen.has(label)) this.repeatedLabel(spans, i);
      seen.add(label);
    }
  }

  private repeatedLabel(spans: number[], i: number): never {
    const label = this.r.utf8(spans[2 * i]!, spans[2 * i + 1]!);
    this.p.fail('duplicate', `record field label ${JSON.stringify(truncate(label))} repeats`, 'fields', i);
  }

  private recordField<V>(
    end: number,
    depth: number,
    acc: unknown,
    spans: number[],
    at: number,
    c: ValueConsumer<V>,
  ): void {
    const r = this.r;
    let labelStart = 0;
    let labelStop = 0;
    let value: V | undefined;
    let seen = 0;
    while (r.pos < end) {
      const tag = r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        if (seen !== 0) c.unordered();
        seen = this.once(seen, 1, 'label');
        labelStart = this.utf8Span(tag, end, 'label');
        labelStop = r.pos;
        c.fieldLabel(acc, r, labelStart, labelStop);
      } else if (f === 2) {
        seen = this.once(seen, 2, 'value');
        const stop = this.enter(tag, end, 'value');
        value = this.walk(stop, depth + 1, c);
        this.leave(stop);
      } else this.unknown(tag);
    }
    if (labelStop === labelStart)
      this.p.fail(
        'missing_field',
        'record field has an empty label (the participant and the reference hashers disagree on how to hash it)',
        'label',
      );
    if (!(seen & 4)) this.p.fail('missing_field', 'record field has no value', 'value');
    spans[at] = labelStart;
    spans[at + 1] = labelStop;
    c.field(acc, r, labelStart, labelStop, value as V);
  }
}

/** A top-level value left on the wire, to be walked later: its bytes are [start, stop) of the input. */
export class WireValue {
  constructor(
    readonly start: number,
    readonly stop: number,
  ) {}
}

/** The walker over the values a decode with `deferValues` left on the wire. */
export interface WireValues {
  walkDeferred<V>(w: WireValue, c: ValueConsumer<V>): V;
  /** How many values were delimited, and how many walked: equal once every one was checked. */
  readonly deferred: number;
  readonly walked: number;
}

/**
 * What the value walker hands over, in wire order, after checking it. Text,
 * numerics, contract ids, labels, constructors and text-map keys come as byte
 * ranges of the reader's buffer (valid UTF-8 or hex, already checked). Each
 * list, map, record, variant or enum gets an accumulator from its `…Start`
 * (which also receives the message's byte range, for counting its items before
 * they are read). `unordered` is called when a message's fields come in an
 * order other than ascending field numbers (which protobuf allows and the
 * model builder accepts, but an encoder writing in wire order cannot follow).
 */
export interface ValueConsumer<V> {
  unit(): V;
  bool(v: boolean): V;
  /** The ZigZag-encoded 64 bits of a `sint64`, as unsigned low and high words. */
  int64(zigzagLo: number, zigzagHi: number): V;
  date(v: number): V;
  /** The little-endian sfixed64 at `at` in the reader's buffer. */
  timestamp(r: WireReader, at: number): V;
  /** Text (`kind` 'text') or a numeric (`kind` 'numeric'). */
  text(r: WireReader, start: number, stop: number, kind: 'text' | 'numeric'): V;
  /** A party id (checked), as a string and as the bytes [start, stop). */
  party(p: string, r: WireReader, start: number, stop: number): V;
  contractId(r: WireReader, start: number, stop: number): V;
  optionalStart(present: boolean): void;
  optional(inner: V | undefined): V;
  listStart(r: WireReader, start: number, stop: number): unknown;
  listItem(acc: unknown, v: V): void;
  list(acc: unknown): V;
  textMapStart(r: WireReader, start: number, stop: number): unknown;
  textMapKey(acc: unknown, r: WireReader, start: number, stop: number): void;
  /** Before an entry's value; `keySeen` is 0 when the entry has no key (the empty text). */
  textMapValueStart(acc: unknown, keySeen: number): void;
  textMapEntry(acc: unknown, r: WireReader, keyStart: number, keyStop: number, v: V): void;
  textMap(acc: unknown): V;
  genMapStart(r: WireReader, start: number, stop: number): unknown;
  genMapEntry(acc: unknown, k: V, v: V): void;
  genMap(acc: unknown): V;
  recordStart(r: WireReader, start: number, stop: number): unknown;
  recordId(acc: unknown, id: Identifier): void;
  fieldLabel(acc: unknown, r: WireReader, start: number, stop: number): void;
  field(acc: unknown, r: WireReader, labelStart: number, labelStop: number, v: V): void;
  record(acc: unknown): V;
  variantStart(r: WireReader, start: number, stop: number): unknown;
  variantId(acc: unknown, id: Identifier): void;
  /** A variant's or an enum's constructor. */
  constructorName(acc: unknown, r: WireReader, start: number, stop: number): void;
  variant(acc: unknown, r: WireReader, ctorStart: number, ctorStop: number, v: V): V;
  enumStart(r: WireReader, start: number, stop: number): unknown;
  enumId(acc: unknown, id: Identifier): void;
  enum(acc: unknown, r: WireReader, ctorStart: number, ctorStop: number): V;
  unordered(): void;
}

type RecordValue = Extract<Value, { kind: 'record' }>;
type VariantValue = Extract<Value, { kind: 'variant' }>;
type EnumValue = Extract<Value, { kind: 'enum' }>;
type TextMapEntries = { key: string; value: Value }[];
type GenMapEntries = { key: Value; value: Value }[];

function noop(): void {}

/** The model builder: the decoded model's `Value` objects. */
export const MODEL: ValueConsumer<Value> = {
  unit: () => ({ kind: 'unit' }),
  bool: (value) => ({ kind: 'bool', value }),
  int64: (lo, hi) => {
    const u = hi === 0 ? BigInt(lo) : (BigInt(hi) << 32n) | BigInt(lo);
    // ZigZag: (u >>> 1) ^ -(u & 1)
    return { kind: 'int64', value: BigInt.asIntN(64, (u >> 1n) ^ -(u & 1n)) };
  },
  date: (value) => ({ kind: 'date', value }),
  timestamp: (r, at) => ({ kind: 'timestamp', value: r.sfixed64At(at) }),
  text: (r, start, stop, kind) => ({ kind, value: r.utf8(start, stop) }),
  party: (value) => ({ kind: 'party', value }),
  contractId: (r, start, stop) => ({ kind: 'contractId', value: r.utf8(start, stop) }),
  optionalStart: noop,
  optional: (value) => ({ kind: 'optional', value }),
  listStart: () => [],
  listItem: (acc, v) => {
    (acc as Value[]).push(v);
  },
  list: (acc) => ({ kind: 'list', elements: acc as Value[] }),
  textMapStart: () => [],
  textMapKey: noop,
  textMapValueStart: noop,
  textMapEntry: (acc, r, start, stop, value) => {
    (acc as TextMapEntries).push({ key: r.utf8(start, stop), value });
  },
  textMap: (acc) => ({ kind: 'textMap', entries: acc as TextMapEntries }),
  genMapStart: () => [],
  genMapEntry: (acc, key, value) => {
    (acc as GenMapEntries).push({ key, value });
  },
  genMap: (acc) => ({ kind: 'genMap', entries: acc as GenMapEntries }),
  recordStart: (): RecordValue => ({ kind: 'record', recordId: undefined, fields: [] }),
  recordId: (acc, id) => {
    (acc as RecordValue).recordId = id;
  },
  fieldLabel: noop,
  field: (acc, r, start, stop, value) => {
    (acc as RecordValue).fields.push({ label: r.utf8(start, stop), value });
  },
  record: (acc) => acc as RecordValue,
  variantStart: (): { id: Identifier | undefined } => ({ id: undefined }),
  variantId: (acc, id) => {
    (acc as { id: Identifier | undefined }).id = id;
  },
  constructorName: noop,
  variant: (acc, r, start, stop, value): VariantValue => ({
    kind: 'variant',
    variantId: (acc as { id: Identifier | undefined }).id,
    constructor: r.utf8(start, stop),
    value,
  }),
  enumStart: (): { id: Identifier | undefined } => ({ id: undefined }),
  enumId: (acc, id) => {
    (acc as { id: Identifier | undefined }).id = id;
  },
  enum: (acc, r, start, stop): EnumValue => ({
    kind: 'enum',
    enumId: (acc as { id: Identifier | undefined }).id,
    constructor: r.utf8(start, stop),
  }),
  unordered: noop,
};

const VALUE_NAMES = [
  '',
  'unit',
  'bool',
  'int64',
  'date',
  'timestamp',
  'numeric',
  'party',
  'text',
  'contract_id',
  'optional',
  'list',
  'text_map',
  'gen_map',
  'record',
  'variant',
  'enum',
];
