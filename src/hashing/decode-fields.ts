/**
 * The bottom layer of the prepared-transaction decoder: fields that need more
 * than the wire rules — party ids (cached by their bytes once valid), package
 * names, contract ids, Daml-LF versions, identifiers (cached and frozen),
 * 64- and 32-bit integers, sorted party sets, required fields. Every check
 * here is one the participant applies when it reads the same field.
 */
import {
  contractIdBytesProblem,
  dottedNameProblem,
  packageIdProblem,
  packageNameBytesOk,
  packageNameProblem,
  partyProblem,
} from './canonical.js';
import { MessageDecoder } from './message-decoder.js';
import type { Identifier } from './model.js';
import { ByteCache, WT_LEN, WT_VARINT } from './wire.js';

/** Daml-LF serialization versions a V2 or V3 hash can cover. */
export const KNOWN_LF_VERSIONS: ReadonlySet<string> = new Set(['2.1', '2']);

/** The known versions with their UTF-8 bytes, for reading them without decoding. */
const LF_VERSION_BYTES: readonly (readonly [string, Uint8Array])[] = [...KNOWN_LF_VERSIONS].map((v) => [
  v,
  Buffer.from(v, 'utf8'),
]);

export const EMPTY_ID: Identifier = Object.freeze({ packageId: '', moduleName: '', entityName: '' });

/**
 * Caches shared by all decodes. Transactions name the same few templates and
 * parties again and again. Identifiers are keyed by their exact wire bytes and
 * frozen, so a cached object can never differ from a fresh decode; parties are
 * remembered only once they passed validation. Both are bounded.
 */
const CACHE_LIMIT = 10_000;
const IDENTIFIERS = new ByteCache<Identifier>(CACHE_LIMIT);
const PARTIES = new ByteCache<string>(CACHE_LIMIT);

export abstract class FieldDecoder extends MessageDecoder {
  // ---- helpers -----------------------------------------------------------

  protected readonly identifiers = IDENTIFIERS;
  protected readonly parties = PARTIES;

  protected str(tag: number, end: number, name: string, index?: number): string {
    return this.r.string(tag, end, name, index);
  }

  /** Where the bytes of the last party read start (they end at `r.pos`). */
  protected partyAt = 0;

  protected party(tag: number, end: number, name: string, index?: number): string {
    const r = this.r;
    r.expect(tag, WT_LEN, name, index);
    const stop = r.len(end, name, index);
    const start = r.pos;
    this.partyAt = start;
    r.pos = stop;
    // Party ids repeat: a hit skips decoding and validation, both done when it was cached.
    const hit = this.parties.get(r, start, stop);
    if (hit !== undefined) return hit;
    const s = r.text(start, stop, name, index);
    const bad = partyProblem(s);
    if (bad) this.p.fail('non_canonical', `party ${JSON.stringify(truncate(s))} ${bad}`, name, index);
    this.parties.set(r, start, stop, s);
    return s;
  }

  /** A node's or key's `package_name`, as Daml-LF defines package names. */
  protected packageName(tag: number, end: number): string {
    const start = this.packageNameSpan(tag, end);
    return this.r.utf8(start, this.r.pos);
  }

  /** `packageName`'s bytes, checked; returns where they start (`r.pos` is their end). */
  protected packageNameSpan(tag: number, end: number): number {
    const r = this.r;
    const start = r.span(tag, end, 'package_name');
    // The usual name is accepted on its bytes; anything else is decoded and checked as text, which
    // refuses it (invalid UTF-8 first, as for any string field) with the words of `packageNameProblem`.
    if (packageNameBytesOk(r.buf, start, r.pos)) return start;
    const s = r.text(start, r.pos, 'package_name');
    const bad = packageNameProblem(s);
    if (bad)
      this.p.fail('invalid_identifier', `package name ${JSON.stringify(truncate(s))} ${bad}`, 'package_name');
    return start;
  }

  protected contractId(tag: number, end: number, name: string, index?: number): string {
    const start = this.contractIdSpan(tag, end, name, index);
    return this.r.utf8(start, this.r.pos);
  }

  /** Text's bytes, checked to be UTF-8; returns where they start (`r.pos` is their end). */
  protected utf8Span(tag: number, end: number, name: string): number {
    const r = this.r;
    const start = r.span(tag, end, name);
    if (!r.isUtf8(start, r.pos)) r.failUtf8(start, name);
    return start;
  }

  /** A contract id's bytes, checked; returns where they start (`r.pos` is their end). */
  protected contractIdSpan(tag: number, end: number, name: string, index?: number): number {
    const r = this.r;
    const start = r.span(tag, end, name, index);
    const bad = contractIdBytesProblem(r.buf, start, r.pos);
    if (bad) {
      if (!r.isUtf8(start, r.pos)) r.failUtf8(start, name, index);
      this.p.fail(
        'non_canonical',
        `contract id ${JSON.stringify(truncate(r.utf8(start, r.pos)))} ${bad}`,
        name,
        index,
      );
    }
    return start;
  }

  protected uint64(tag: number, end: number, name: string): bigint {
    this.r.expect(tag, WT_VARINT, name);
    this.p.push(name);
    const v = this.r.varint64(end, name);
    this.p.pop();
    return v;
  }

  protected int32(tag: number, end: number, name: string): number {
    this.r.expect(tag, WT_VARINT, name);
    this.p.push(name);
    const v = BigInt.asIntN(64, this.r.varint64(end, name));
    if (v < -0x80000000n || v > 0x7fffffffn) this.p.fail('malformed', `int32 value ${v} out of range`);
    this.p.pop();
    return Number(v);
  }

  /** Checks a party list (its first `n` entries) is strictly ascending (a set, as the participant hashes it). */
  protected sortedSet(list: readonly string[], name: string, n = list.length): void {
    for (let i = 1; i < n; i++) {
      const a = list[i - 1]!;
      const b = list[i]!;
      if (a === b) this.p.fail('duplicate', `${JSON.stringify(truncate(b))} appears twice in a set`, name);
      if (a > b)
        this.p.fail(
          'unsorted',
          `set is not in ascending order at index ${i}: the participant hashes it sorted`,
          name,
        );
    }
  }

  /** A known Daml-LF version, as the very string of `KNOWN_LF_VERSIONS` (read without decoding). */
  protected lfVersion(tag: number, end: number): string {
    const r = this.r;
    const start = r.span(tag, end, 'lf_version');
    const n = r.pos - start;
    for (let k = 0; k < LF_VERSION_BYTES.length; k++) {
      const [v, b] = LF_VERSION_BYTES[k]!;
      if (b.length !== n) continue;
      let i = 0;
      while (i < n && r.buf[start + i] === b[i]) i++;
      if (i === n) return v;
    }
    const v = r.text(start, r.pos, 'lf_version');
    if (!KNOWN_LF_VERSIONS.has(v))
      this.p.fail(
        'unsupported_version',
        `unknown Daml-LF version ${JSON.stringify(truncate(v))}`,
        'lf_version',
      );
    return v;
  }

  protected require(seen: number, fields: number[], names: string[]): void {
    for (let i = 0; i < fields.length; i++) {
      if (!(seen & (1 << fields[i]!))) this.p.fail('missing_field', 'required field is absent', names[i]);
    }
  }

  protected identifierField(tag: number, end: number, name: string): Identifier {
    const stop = this.enter(tag, end, name);
    const start = this.r.pos;
    let id = this.identifiers.get(this.r, start, stop);
    if (id) this.r.pos = stop;
    else {
      id = Object.freeze(this.identifier(stop));
      this.identifiers.set(this.r, start, stop, id);
    }
    this.leave(stop);
    return id;
  }

  protected identifier(end: number): Identifier {
    const id: Identifier = { packageId: '', moduleName: '', entityName: '' };
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      switch (f) {
        case 1:
          seen = this.once(seen, f, 'package_id');
          id.packageId = this.str(tag, end, 'package_id');
          break;
        case 2:
          seen = this.once(seen, f, 'module_name');
          id.moduleName = this.str(tag, end, 'module_name');
          break;
        case 3:
          seen = this.once(seen, f, 'entity_name');
          id.entityName = this.str(tag, end, 'entity_name');
          break;
        default:
          this.unknown(tag);
      }
    }
    // Daml-LF's identifier rules, which the participant applies when it decodes: they also bound
    // every identifier's encoding to a few kilobytes.
    if (id.packageId === '') this.p.fail('missing_field', 'identifier has no package id', 'package_id');
    const pkg = packageIdProblem(id.packageId);
    if (pkg)
      this.p.fail(
        'invalid_identifier',
        `package id ${JSON.stringify(truncate(id.packageId))} ${pkg}`,
        'package_id',
      );
    const m = dottedNameProblem(id.moduleName);
    if (m)
      this.p.fail(
        'invalid_identifier',
        `module name ${JSON.stringify(truncate(id.moduleName))} ${m}`,
        'module_name',
      );
    const e = dottedNameProblem(id.entityName);
    if (e)
      this.p.fail(
        'invalid_identifier',
        `entity name ${JSON.stringify(truncate(id.entityName))} ${e}`,
        'entity_name',
      );
    return id;
  }
}

export function truncate(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}
