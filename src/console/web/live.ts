/**
 * Live updates: one server-sent event stream (`GET /v1/events/stream`, the
 * event outbox as it grows) per page, shared by the views. A person whose
 * roles cannot read events gets no stream; views then refresh on a timer.
 */
import type { Live, LiveEvent, Role } from './context.js';

const READERS: Role[] = ['auditor', 'operator', 'admin'];

export function openLive(roles: readonly Role[]): Live & { close(): void } {
  const subscribers = new Set<{ prefixes: string[]; fn: (e: LiveEvent) => void }>();
  let source: EventSource | undefined;
  let connected = false;
  if (roles.some((r) => READERS.includes(r)) && typeof EventSource === 'function') {
    source = new EventSource('/v1/events/stream', { withCredentials: true });
    source.addEventListener('open', () => {
      connected = true;
      document.documentElement.dataset.live = 'on';
    });
    source.addEventListener('error', () => {
      connected = false;
      document.documentElement.dataset.live = 'off';
    });
    source.addEventListener('event', (m) => {
      let e: LiveEvent;
      try {
        e = JSON.parse((m as MessageEvent<string>).data) as LiveEvent;
      } catch {
        return;
      }
      for (const s of subscribers)
        if (s.prefixes.some((p) => e.type.startsWith(p))) {
          try {
            s.fn(e);
          } catch {
            // one view's failure does not stop the others
          }
        }
    });
  }
  return {
    get connected() {
      return connected;
    },
    subscribe(prefixes, fn) {
      const s = { prefixes, fn };
      subscribers.add(s);
      return () => void subscribers.delete(s);
    },
    whileOffline(fn, ms = 10_000) {
      const timer = window.setInterval(() => {
        if (!connected) fn();
      }, ms);
      return () => clearInterval(timer);
    },
    close() {
      source?.close();
    },
  };
}
