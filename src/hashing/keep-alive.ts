/**
 * Keeps one object of each short-lived kind the hasher uses alive between calls.
 *
 * V8's optimised code refers weakly to the hidden classes ("maps") of the
 * objects it was optimised for. A decoder, its wire reader and field path, a
 * hasher and a node:crypto Hash object each live for one call only; when a
 * full garbage collection finds none of a kind alive, it drops that kind's map
 * and deoptimises every function optimised for it ("weak objects"): the
 * decoding and hashing code then ran unoptimised, at half speed or less, for
 * the few hundred milliseconds it took V8 to optimise it again — after every
 * full collection, which a busy service runs regularly. One live object of
 * each kind keeps the maps, and the code, alive.
 *
 * The object kept must have the map in use now: a map is replaced when a field
 * first holds a value of another representation (the read position becoming a
 * double), so callers keep an object made or used after their work, and one
 * that holds no input (an empty decoder, a finished hash).
 */
const kept = new Map<string, object>();

export function keepAlive(kind: string, o: object): void {
  kept.set(kind, o);
}
