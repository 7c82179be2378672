/**
 * The in-process signal "events were appended": `appendEvents` raises it
 * with the highest `seq` it wrote, the webhook deliverer listens, so that a
 * delivery starts right after the change instead of at the next poll. It is
 * raised inside the appending transaction, BEFORE its commit: a listener
 * must expect the events to become visible a little later (or never, when
 * the transaction rolls back) and keep its poll as the safety net.
 */

type Listener = (seq: number) => void;

const listeners = new Set<Listener>();

/** Calls `fn` with the highest seq of each append in this process; returns the unsubscribe. */
export function onEventsAppended(fn: Listener): () => void {
  listeners.add(fn);
  return () => void listeners.delete(fn);
}

/** Raised by appendEvents; a listener that throws is ignored (it must not fail the transaction). */
export function eventsAppended(seq: number): void {
  for (const fn of listeners) {
    try {
      fn(seq);
    } catch {
      // a listener's problem is its own
    }
  }
}
