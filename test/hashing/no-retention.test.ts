/**
 * The hasher keeps a few objects alive between calls (src/hashing/keep-alive.ts),
 * and none of them may hold the caller's input: a large prepared transaction
 * must be collectable as soon as its hash is returned, whether it was accepted
 * or refused.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { encodePreparedTransaction } from '../../src/hashing/encode.js';
import { TransactionError } from '../../src/hashing/errors.js';
import { hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import { baseModel } from '../support/fixtures.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Hashes a fresh copy of `bytes` and returns a weak reference to the memory of that copy. */
function hashFresh(
  bytes: Uint8Array,
  scheme: 'v2' | 'v3',
): { ref: WeakRef<ArrayBufferLike>; refused: boolean } {
  const input = Uint8Array.from(bytes);
  let refused = false;
  try {
    hashPreparedTransaction(input, { scheme });
  } catch (e) {
    if (!(e instanceof TransactionError)) throw e;
    refused = true;
  }
  // The decoder's views of the input share its ArrayBuffer: that is what must not be held.
  return { ref: new WeakRef(input.buffer), refused };
}

describe('the input is not held once hashing returns', () => {
  const valid = encodePreparedTransaction(baseModel());
  // The same transaction with its last byte dropped: refused (the streaming pass, then decode-then-hash).
  const damaged = valid.subarray(0, valid.length - 1);

  for (const scheme of ['v2', 'v3'] as const)
    for (const [name, bytes, refusedExpected] of [
      ['accepted', valid, false],
      ['refused', damaged, true],
    ] as const)
      it(`${scheme}, ${name}`, async () => {
        const { ref, refused } = hashFresh(bytes, scheme);
        expect(refused).toBe(refusedExpected);
        // WeakRef targets are kept until the end of the current job: collect after it.
        await new Promise((r) => setTimeout(r, 0));
        gc();
        gc();
        expect(ref.deref(), 'the input is still reachable after hashing').toBeUndefined();
      });
});
