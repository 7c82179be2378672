/**
 * The error types of the verification core. Every refusal of an input is a
 * `TransactionError`: it names a class of problem (`code`, stable,
 * machine-readable) and the path of the offending field in protobuf field names
 * (e.g. `metadata.input_contracts[2].v1.signatories`). An `InvariantError` is
 * no refusal: the core met a state its own code rules out.
 */

export type RefusalCode =
  // wire level
  | 'bad_encoding' // input text is not valid base64 / hex / JSON
  | 'truncated' // input ends inside a field
  | 'trailing_bytes' // bytes after a complete transaction and metadata
  | 'malformed' // invalid tag, wire type, varint or length
  | 'unknown_field' // a field number the signer does not know
  | 'duplicate_field' // a singular field or a oneof set more than once
  | 'invalid_utf8'
  // structure
  | 'missing_field' // a required field or oneof is absent
  | 'too_deep' // value nesting beyond the Daml limit
  | 'node_id' // duplicate or non-canonical node id
  | 'missing_node' // a root or child names a node that does not exist
  | 'shared_node' // a node referenced more than once
  | 'cycle'
  | 'orphan_node' // a node not reachable from the roots
  | 'seed' // missing, extra, duplicate or non-32-byte node seed
  | 'unsorted' // a set or sorted map out of order
  | 'duplicate' // a set or map with a repeated element
  | 'non_canonical' // a value the participant would re-render differently
  | 'unsupported' // a feature the hashing scheme cannot cover
  | 'unsupported_version' // unknown LF version or hashing scheme
  | 'not_covered' // the caller asked for a guarantee the scheme does not give
  // keys and identities
  | 'invalid_key' // a public key that is not a supported, well-formed key
  | 'invalid_party' // a party hint or party id that breaks the Daml rules
  | 'invalid_identifier'; // a package id, package name, module or entity name outside the Daml-LF rules

export class TransactionError extends Error {
  override readonly name = 'TransactionError';
  constructor(
    readonly code: RefusalCode,
    /** Dotted protobuf path of the offending field, `''` for the whole input. */
    readonly path: string,
    readonly detail: string,
  ) {
    super(path ? `${code} at ${path}: ${detail}` : `${code}: ${detail}`);
  }
}

/** Path kept as a mutable stack of segments; rendered only when an error is thrown. */
export class FieldPath {
  private readonly segs: (string | number)[] = [];
  push(seg: string | number): void {
    this.segs.push(seg);
  }
  pop(): void {
    this.segs.pop();
  }
  get depth(): number {
    return this.segs.length;
  }
  render(...extra: (string | number | undefined)[]): string {
    let out = '';
    const all = [...this.segs, ...extra.filter((x) => x !== undefined)];
    for (const s of all) {
      if (typeof s === 'number') out += `[${s}]`;
      else out += out === '' ? s : `.${s}`;
    }
    return out;
  }
  /** Throws for the current path, optionally extended by field name and index. */
  fail(code: RefusalCode, detail: string, ...extra: (string | number | undefined)[]): never {
    throw new TransactionError(code, this.render(...extra), detail);
  }
}

/**
 * A state the verification core's own invariants rule out, met anyway: a bug
 * in this code, not a fault of the input. Deliberately not a
 * `TransactionError`: no caller may report it as the input's refusal, nor fall
 * back around it to another path, so nothing is signed after it.
 */
export class InvariantError extends Error {
  override readonly name = 'InvariantError';
  constructor(detail: string) {
    super(`internal invariant broken: ${detail}`);
  }
}
