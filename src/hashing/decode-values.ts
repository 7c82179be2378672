/**
 * Daml values and contract keys, recursively (bounded by MAX_VALUE_DEPTH):
 * every variant of `Value`, with the participant's rules — canonical numerics,
 * text-map keys in ascending UTF-8 order, record fields with non-empty,
 * unique labels — and global keys with their 32-byte hash and sorted maintainers.
 */
import { compareUtf8, numericProblem } from './canonical.js';
import { FieldDecoder, truncate } from './decode-fields.js';
import type { GlobalKey, GlobalKeyWithMaintainers, Identifier, Value } from './model.js';
import { WT_I64, WT_LEN, WT_VARINT } from './wire.js';

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

  // ---- values (recursive, bounded by MAX_VALUE_DEPTH; a top-level value is depth 0) ----

  protected value(end: number, depth: number): Value {
    if (depth > MAX_VALUE_DEPTH)
      this.p.fail('too_deep', `value nesting exceeds the Daml limit of ${MAX_VALUE_DEPTH}`);
    let v: Value | undefined;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      if (f < 1 || f > 16) this.unknown(tag);
      if (v) this.p.fail('duplicate_field', 'value oneof set more than once', VALUE_NAMES[f]);
      v = this.valueSum(tag, f, end, depth);
    }
    if (!v) this.p.fail('missing_field', 'value has no variant set (sum oneof is empty)');
    return v;
  }

  protected valueSum(tag: number, f: number, end: number, depth: number): Value {
    const r = this.r;
    switch (f) {
      case 1: {
        const stop = this.enter(tag, end, 'unit');
        if (r.pos < stop) this.unknown(r.tag(stop));
        this.leave(stop);
        return { kind: 'unit' };
      }
      case 2:
        return { kind: 'bool', value: this.bool(tag, end, 'bool') };
      case 3: {
        r.expect(tag, WT_VARINT, 'int64');
        const u = r.varint64(end, 'int64');
        // ZigZag: (u >>> 1) ^ -(u & 1)
        return { kind: 'int64', value: BigInt.asIntN(64, (u >> 1n) ^ -(u & 1n)) };
      }
      case 4:
        return { kind: 'date', value: this.int32(tag, end, 'date') };
      case 5:
        r.expect(tag, WT_I64, 'timestamp');
        return { kind: 'timestamp', value: r.sfixed64(end) };
      case 6: {
        const s = this.str(tag, end, 'numeric');
        const bad = numericProblem(s);
        if (bad) this.p.fail('non_canonical', `numeric ${JSON.stringify(truncate(s))} ${bad}`, 'numeric');
        return { kind: 'numeric', value: s };
      }
      case 7:
        return { kind: 'party', value: this.party(tag, end, 'party') };
      case 8:
        return { kind: 'text', value: this.str(tag, end, 'text') };
      case 9:
        return { kind: 'contractId', value: this.contractId(tag, end, 'contract_id') };
      case 10: {
        const stop = this.enter(tag, end, 'optional');
        let inner: Value | undefined;
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t >>> 3 !== 1) this.unknown(t);
          if (inner) this.p.fail('duplicate_field', 'singular field occurs more than once', 'value');
          const s2 = this.enter(t, stop, 'value');
          inner = this.value(s2, depth + 1);
          this.leave(s2);
        }
        this.leave(stop);
        return { kind: 'optional', value: inner };
      }
      case 11: {
        const stop = this.enter(tag, end, 'list');
        const elements: Value[] = [];
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t >>> 3 !== 1) this.unknown(t);
          const i = elements.length;
          const s2 = this.enter(t, stop, 'elements', i);
          elements.push(this.value(s2, depth + 1));
          this.leave(s2, i);
        }
        this.leave(stop);
        return { kind: 'list', elements };
      }
      case 12: {
        const stop = this.enter(tag, end, 'text_map');
        const entries: { key: string; value: Value }[] = [];
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t >>> 3 !== 1) this.unknown(t);
          const i = entries.length;
          const s2 = this.enter(t, stop, 'entries', i);
          let key = '';
          let value: Value | undefined;
          let seen = 0;
          while (r.pos < s2) {
            const t2 = r.tag(s2);
            const f2 = t2 >>> 3;
            if (f2 === 1) {
              seen = this.once(seen, 1, 'key');
              key = this.str(t2, s2, 'key');
            } else if (f2 === 2) {
              seen = this.once(seen, 2, 'value');
              const s3 = this.enter(t2, s2, 'value');
              value = this.value(s3, depth + 1);
              this.leave(s3);
            } else this.unknown(t2);
          }
          if (!value) this.p.fail('missing_field', 'text-map entry has no value', 'value');
          if (i > 0) {
            const c = compareUtf8(entries[i - 1]!.key, key);
            if (c === 0)
              this.p.fail('duplicate', `text-map key ${JSON.stringify(truncate(key))} appears twice`, 'key');
            if (c > 0) this.p.fail('unsorted', 'text-map keys are not in ascending UTF-8 order', 'key');
          }
          entries.push({ key, value });
          this.leave(s2, i);
        }
        this.leave(stop);
        return { kind: 'textMap', entries };
      }
      case 13: {
        const stop = this.enter(tag, end, 'gen_map');
        const entries: { key: Value; value: Value }[] = [];
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t >>> 3 !== 1) this.unknown(t);
          const i = entries.length;
          const s2 = this.enter(t, stop, 'entries', i);
          let key: Value | undefined;
          let value: Value | undefined;
          let seen = 0;
          while (r.pos < s2) {
            const t2 = r.tag(s2);
            const f2 = t2 >>> 3;
            if (f2 !== 1 && f2 !== 2) this.unknown(t2);
            const name = f2 === 1 ? 'key' : 'value';
            seen = this.once(seen, f2, name);
            const s3 = this.enter(t2, s2, name);
            const v = this.value(s3, depth + 1);
            this.leave(s3);
            if (f2 === 1) key = v;
            else value = v;
          }
          if (!key) this.p.fail('missing_field', 'gen-map entry has no key', 'key');
          if (!value) this.p.fail('missing_field', 'gen-map entry has no value', 'value');
          entries.push({ key, value });
          this.leave(s2, i);
        }
        this.leave(stop);
        return { kind: 'genMap', entries };
      }
      case 14: {
        const stop = this.enter(tag, end, 'record');
        let recordId: Identifier | undefined;
        const fields: { label: string; value: Value }[] = [];
        let seen = 0;
        while (r.pos < stop) {
          const t = r.tag(stop);
          const f2 = t >>> 3;
          if (f2 === 1) {
            seen = this.once(seen, 1, 'record_id');
            recordId = this.identifierField(t, stop, 'record_id');
          } else if (f2 === 2) {
            const i = fields.length;
            const s2 = this.enter(t, stop, 'fields', i);
            fields.push(this.recordField(s2, depth));
            this.leave(s2, i);
          } else this.unknown(t);
        }
        this.uniqueLabels(fields);
        this.leave(stop);
        return { kind: 'record', recordId, fields };
      }
      case 15: {
        const stop = this.enter(tag, end, 'variant');
        let variantId: Identifier | undefined;
        let ctor = '';
        let value: Value | undefined;
        let seen = 0;
        while (r.pos < stop) {
          const t = r.tag(stop);
          const f2 = t >>> 3;
          if (f2 === 1) {
            seen = this.once(seen, 1, 'variant_id');
            variantId = this.identifierField(t, stop, 'variant_id');
          } else if (f2 === 2) {
            seen = this.once(seen, 2, 'constructor');
            ctor = this.str(t, stop, 'constructor');
          } else if (f2 === 3) {
            seen = this.once(seen, 3, 'value');
            const s2 = this.enter(t, stop, 'value');
            value = this.value(s2, depth + 1);
            this.leave(s2);
          } else this.unknown(t);
        }
        if (ctor === '') this.p.fail('missing_field', 'variant has no constructor', 'constructor');
        if (!value) this.p.fail('missing_field', 'variant has no value', 'value');
        this.leave(stop);
        return { kind: 'variant', variantId, constructor: ctor, value };
      }
      default: {
        const stop = this.enter(tag, end, 'enum');
        let enumId: Identifier | undefined;
        let ctor = '';
        let seen = 0;
        while (r.pos < stop) {
          const t = r.tag(stop);
          const f2 = t >>> 3;
          if (f2 === 1) {
            seen = this.once(seen, 1, 'enum_id');
            enumId = this.identifierField(t, stop, 'enum_id');
          } else if (f2 === 2) {
            seen = this.once(seen, 2, 'constructor');
            ctor = this.str(t, stop, 'constructor');
          } else this.unknown(t);
        }
        if (ctor === '') this.p.fail('missing_field', 'enum has no constructor', 'constructor');
        this.leave(stop);
        return { kind: 'enum', enumId, constructor: ctor };
      }
    }
  }

  /**
   * Daml records never repeat a field. Canton would hash a repeated label, but every reader of the
   * model finds fields by label (the inspect JSON keeps one value per label, the recogniser the
   * first): a repeat would hide a hashed field from the person signing (docs/hashing.md).
   */
  protected uniqueLabels(fields: { label: string }[]): void {
    const n = fields.length;
    if (n < 2) return;
    if (n <= 16) {
      for (let i = 1; i < n; i++)
        for (let j = 0; j < i; j++)
          if (fields[i]!.label === fields[j]!.label)
            this.p.fail(
              'duplicate',
              `record field label ${JSON.stringify(truncate(fields[i]!.label))} repeats`,
              'fields',
              i,
            );
      return;
    }
    const seen = new Set<string>();
    fields.forEach((f, i) => {
      if (seen.has(f.label))
        this.p.fail(
          'duplicate',
          `record field label ${JSON.stringify(truncate(f.label))} repeats`,
          'fields',
          i,
        );
      seen.add(f.label);
    });
  }

  protected recordField(end: number, depth: number): { label: string; value: Value } {
    let label = '';
    let value: Value | undefined;
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        seen = this.once(seen, 1, 'label');
        label = this.str(tag, end, 'label');
      } else if (f === 2) {
        seen = this.once(seen, 2, 'value');
        const stop = this.enter(tag, end, 'value');
        value = this.value(stop, depth + 1);
        this.leave(stop);
      } else this.unknown(tag);
    }
    if (label === '')
      this.p.fail(
        'missing_field',
        'record field has an empty label (the participant and the reference hashers disagree on how to hash it)',
        'label',
      );
    if (!value) this.p.fail('missing_field', 'record field has no value', 'value');
    return { label, value };
  }
}

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
