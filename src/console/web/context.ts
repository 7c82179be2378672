/**
 * What every view of the console gets: the signed-in person (as
 * `GET /console/session` describes them), the route's parameters, live
 * events, and navigation.
 */

export type Role = 'admin' | 'operator' | 'withdrawer' | 'approver' | 'auditor';

export interface Session {
  caller: string;
  subject: string;
  roles: Role[];
  parties: string[];
  session?: { csrf: string; expiresAt: string; idleSeconds: number };
  dev: boolean;
  webauthn: { rpId: string; rpName: string };
}

export interface LiveEvent {
  seq: number;
  type: string;
  subject: string;
  createdAt: string;
  data: Record<string, unknown>;
}

export interface Live {
  /** True while the event stream is connected (views refresh on a timer otherwise). */
  readonly connected: boolean;
  /** Calls `fn` with each event whose type starts with one of `prefixes`; returns the unsubscribe. */
  subscribe(prefixes: string[], fn: (e: LiveEvent) => void): () => void;
  /** Calls `fn` every `ms` while the stream is not connected; returns the stop. */
  whileOffline(fn: () => void, ms?: number): () => void;
}

export interface ViewContext {
  session: Session;
  params: URLSearchParams;
  live: Live;
  navigate(hash: string): void;
  /** True when the person has one of these roles. */
  can(...roles: Role[]): boolean;
}

/** A view renders into `main` and may return a cleanup run when the person leaves it. */
export type Cleanup = () => void;

export interface View {
  /** The hash route: `#/<path>`. */
  path: string;
  title: string;
  /** Roles whose API routes this view reads; the view is offered only to them. */
  roles: Role[];
  render(main: HTMLElement, ctx: ViewContext): Promise<Cleanup | undefined> | Cleanup | undefined;
}
