/**
 * Console sign-in sessions (migration 12). A session is a person signed in
 * to the web console: who they are (the principal their identity provider's
 * claims gave), the CSRF token their page sends with every change, and two
 * clocks — an idle timeout (renewed by each use) and an absolute expiry.
 *
 * The cookie holds a random session id; only its SHA-256 is stored, so a
 * copy of the database signs no one in. Rows of ended or expired sessions
 * are removed when a new session starts. Signing in and out is audited
 * (`console.signin`, `console.signout`) in the same transaction.
 */
import { createHash, randomBytes } from 'node:crypto';
import { appendAuditBatch } from '../audit.js';
import type { Json } from '../canonical.js';
import type { Db } from '../db.js';

export interface ConsoleSession {
  idHash: string;
  /** The principal as the API's authentication builds it (src/server/auth.ts `Principal`). */
  principal: Json;
  csrf: string;
  createdAt: string;
  lastSeen: string;
  expiresAt: string;
}

interface Row {
  id_hash: string;
  principal: Json;
  csrf: string;
  created_at: string;
  last_seen: string;
  expires_at: string;
}

const fromRow = (r: Row): ConsoleSession => ({
  idHash: r.id_hash,
  principal: r.principal,
  csrf: r.csrf,
  createdAt: r.created_at,
  lastSeen: r.last_seen,
  expiresAt: r.expires_at,
});

/** The stored form of a session id (the cookie's value). */
export function sessionIdHash(id: string): string {
  return createHash('sha256').update(id, 'utf8').digest('hex');
}

/** How often a session's `last_seen` is written at most (a page polls; each poll need not write). */
const TOUCH_EVERY_MS = 15_000;

export class SessionRepo {
  constructor(private readonly db: Db) {}

  /**
   * Starts a session for `principal`; returns the cookie value (never
   * stored) and the session. `who` names the person in the audit log.
   */
  async start(
    principal: Json,
    opts: { absoluteMs: number; who: string; how: string },
  ): Promise<{ id: string; session: ConsoleSession }> {
    const id = randomBytes(32).toString('base64url');
    const csrf = randomBytes(32).toString('base64url');
    const session = await this.db.transaction(async (tx) => {
      await tx.query(
        `DELETE FROM console_sessions WHERE ended_at IS NOT NULL OR expires_at < now() - interval '1 day'`,
      );
      const r = await tx.query<Row>(
        `INSERT INTO console_sessions (id_hash, principal, csrf, expires_at)
           VALUES ($1, $2, $3, now() + $4::int * interval '1 millisecond')
         RETURNING id_hash, principal, csrf, created_at, last_seen, expires_at`,
        [sessionIdHash(id), JSON.stringify(principal), csrf, Math.max(1000, Math.round(opts.absoluteMs))],
      );
      await appendAuditBatch(tx, [
        {
          actor: opts.who,
          action: 'console.signin',
          subject: `session:${sessionIdHash(id).slice(0, 16)}`,
          details: { how: opts.how },
        },
      ]);
      return fromRow(r.rows[0] as Row);
    });
    return { id, session };
  }

  /**
   * The live session with this cookie value, its idle clock renewed; undefined
   * when there is none, it ended, it passed its expiry, or it was idle for
   * longer than `idleMs`.
   */
  async use(id: string, idleMs: number): Promise<ConsoleSession | undefined> {
    const idle = Math.max(1000, Math.round(idleMs));
    const r = await this.db.query<Row>(
      `SELECT id_hash, principal, csrf, created_at, last_seen, expires_at FROM console_sessions
        WHERE id_hash = $1 AND ended_at IS NULL AND expires_at > now()
          AND last_seen > now() - $2::int * interval '1 millisecond'`,
      [sessionIdHash(id), idle],
    );
    const row = r.rows[0];
    if (!row) return undefined;
    if (Date.now() - Date.parse(row.last_seen) > TOUCH_EVERY_MS)
      await this.db.query(
        `UPDATE console_sessions SET last_seen = now() WHERE id_hash = $1 AND ended_at IS NULL`,
        [row.id_hash],
      );
    return fromRow(row);
  }

  /** Whether the session is still live (not ended, expired or idle), without renewing its idle clock. */
  async alive(id: string, idleMs: number): Promise<boolean> {
    const r = await this.db.query(
      `SELECT 1 FROM console_sessions
        WHERE id_hash = $1 AND ended_at IS NULL AND expires_at > now()
          AND last_seen > now() - $2::int * interval '1 millisecond'`,
      [sessionIdHash(id), Math.max(1000, Math.round(idleMs))],
    );
    return r.rows.length > 0;
  }

  /** Ends every live session of `caller` (an admin signing a person out); how many ended. */
  async endAllOf(caller: string, who: string): Promise<number> {
    return this.db.transaction(async (tx) => {
      const r = await tx.query(
        `UPDATE console_sessions SET ended_at = now()
          WHERE principal->>'caller' = $1 AND ended_at IS NULL AND expires_at > now()`,
        [caller],
      );
      const n = r.rowCount ?? 0;
      if (n > 0)
        await appendAuditBatch(tx, [
          { actor: who, action: 'console.signout', subject: `caller:${caller}`, details: { sessions: n } },
        ]);
      return n;
    });
  }

  /** Ends the session (sign-out); false when it was not live. */
  async end(id: string, who: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const r = await tx.query(
        `UPDATE console_sessions SET ended_at = now() WHERE id_hash = $1 AND ended_at IS NULL`,
        [sessionIdHash(id)],
      );
      if ((r.rowCount ?? 0) === 0) return false;
      await appendAuditBatch(tx, [
        { actor: who, action: 'console.signout', subject: `session:${sessionIdHash(id).slice(0, 16)}` },
      ]);
      return true;
    });
  }
}
