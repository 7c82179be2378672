/**
 * What every strict message decoder shares (the prepared-transaction decoder,
 * the topology decoder): the field path, singular-field and unknown-field
 * refusals, booleans, and entering/leaving length-delimited sub-messages.
 * Subclasses own the field numbers and the meaning.
 */
import { FieldPath } from './errors.js';
import { WireReader, WT_LEN, WT_VARINT } from './wire.js';

export abstract class MessageDecoder {
  readonly p: FieldPath = new FieldPath();
  readonly r: WireReader;

  constructor(bytes: Uint8Array) {
    this.r = new WireReader(bytes, this.p);
  }

  /** Marks a singular field as seen; refuses a second occurrence. */
  protected once(seen: number, field: number, name: string): number {
    const bit = 1 << field;
    if (seen & bit) this.p.fail('duplicate_field', 'singular field occurs more than once', name);
    return seen | bit;
  }

  /** Any field this decoder does not know: its bytes could not be shown, so they are never signed. */
  protected unknown(tag: number): never {
    this.p.fail(
      'unknown_field',
      `unknown field number ${tag >>> 3} (wire type ${tag & 7}): its bytes would be unsigned`,
    );
  }

  protected bool(tag: number, end: number, name: string): boolean {
    this.r.expect(tag, WT_VARINT, name);
    const v = this.r.varint32(end, name, name);
    if (v > 1) this.p.fail('non_canonical', `bool encoded as ${v}`, name);
    return v === 1;
  }

  /** Enters a length-delimited sub-message; returns its end offset. */
  protected enter(tag: number, end: number, name: string, index?: number): number {
    this.r.expect(tag, WT_LEN, name, index);
    const stop = this.r.len(end, name, index);
    this.p.push(name);
    if (index !== undefined) this.p.push(index);
    return stop;
  }

  /** Leaves a sub-message, which must have been read exactly to its declared end. */
  protected leave(stop: number, index?: number): void {
    if (this.r.pos !== stop) this.p.fail('malformed', 'sub-message did not end at its declared length');
    if (index !== undefined) this.p.pop();
    this.p.pop();
  }

  /** `enter`, decode with `body`, `leave`. */
  protected nested<T>(tag: number, end: number, name: string, body: (stop: number) => T, index?: number): T {
    const stop = this.enter(tag, end, name, index);
    const out = body(stop);
    this.leave(stop, index);
    return out;
  }
}
