/**
 * The decoder's and the hasher's optimised code survives a full garbage
 * collection. V8 drops the maps of objects none of which is alive at a full
 * collection and deoptimises the code optimised for them; without one live
 * object of each short-lived kind (src/hashing/keep-alive.ts), every full
 * collection sent the whole hashing path back to unoptimised code.
 *
 * Uses V8 intrinsics (enabled at run time) to optimise a function and read its
 * optimisation status; bit 16 is "optimised" in the V8 of Node 20.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { encodePreparedTransaction } from '../../src/hashing/encode.js';
import { Sha256Sink } from '../../src/hashing/sink.js';
import { hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import { WireReader } from '../../src/hashing/wire.js';
import { baseModel } from '../support/fixtures.js';

setFlagsFromString('--allow-natives-syntax');
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const intrinsic = (body: string) => new Function('f', body) as (f: unknown) => number;
const status = intrinsic('return %GetOptimizationStatus(f)');
const prepare = intrinsic('%PrepareFunctionForOptimization(f)');
const optimiseNextCall = intrinsic('%OptimizeFunctionOnNextCall(f)');
const OPTIMISED = 16;

describe('optimised hashing code survives a full garbage collection', () => {
  const bytes = encodePreparedTransaction(baseModel());
  const hashBoth = () => {
    hashPreparedTransaction(bytes, { scheme: 'v2' });
    hashPreparedTransaction(bytes, { scheme: 'v3' });
  };

  for (const [name, fn] of [
    ['WireReader#tag (decoder, reader and path maps)', WireReader.prototype.tag],
    ['Sha256Sink#digest (node:crypto Hash map)', Sha256Sink.prototype.digest],
  ] as const) {
    it(name, () => {
      hashBoth();
      prepare(fn);
      hashBoth();
      optimiseNextCall(fn);
      hashBoth();
      expect(status(fn) & OPTIMISED, 'precondition: optimised before the collection').toBe(OPTIMISED);
      gc();
      gc();
      expect(status(fn) & OPTIMISED).toBe(OPTIMISED);
    });
  }
});
