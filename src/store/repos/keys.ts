/**
 * Key metadata in the database: label, backend, scheme, fingerprint, public
 * key, created, disabled. Only public facts: the private key stays in the
 * keystore or the HSM, and nothing here can hold it (the table has no such
 * column, and `put` copies named public fields only).
 */

import { type BackendKind, KeyError } from '../../keys/backend.js';
import type { KeyScheme } from '../../keys/schemes.js';
import { appendAudit } from '../audit.js';
import type { Db } from '../db.js';
import { NotFoundError } from '../errors.js';

export interface KeyMetadata {
  label: string;
  backend: BackendKind;
  scheme: KeyScheme;
  fingerprint: string;
  /** SubjectPublicKeyInfo DER, base64. */
  publicKeySpki: string;
  createdAt: string;
  disabled: boolean;
}

/** What `put` accepts: a KeyDescription (publicKeySpki as bytes) or KeyMetadata. */
export interface KeyMetadataInput {
  label: string;
  backend: BackendKind;
  scheme: KeyScheme;
  fingerprint: string;
  publicKeySpki: Uint8Array | string;
  createdAt?: string;
  disabled?: boolean;
}

interface Row {
  label: string;
  backend: BackendKind;
  scheme: KeyScheme;
  fingerprint: string;
  public_key_spki: string;
  created_at: string;
  disabled: boolean;
}

function fromRow(r: Row): KeyMetadata {
  return {
    label: r.label,
    backend: r.backend,
    scheme: r.scheme,
    fingerprint: r.fingerprint,
    publicKeySpki: r.public_key_spki,
    createdAt: r.created_at,
    disabled: r.disabled,
  };
}

export class KeyRepo {
  constructor(
    private readonly db: Db,
    private readonly opts: { actor?: string } = {},
  ) {}

  /**
   * Audits that `actor` is about to create a key (`key.create`: label,
   * backend, scheme), before the key exists: a key is never made without a
   * row naming who asked, even when the process stops before its `key.put`.
   * A failing write throws, and then no key may be made.
   */
  async noteCreation(k: { label: string; backend: string; scheme: string }, actor: string): Promise<void> {
    await appendAudit(this.db, {
      actor,
      action: 'key.create',
      subject: `key:${k.label}`,
      details: { backend: k.backend, scheme: k.scheme },
    });
  }

  /**
   * Makes a key through `make`, audited around it: `key.create` first (see
   * `noteCreation`: a failing write throws and `make` never runs), and when
   * `make` fails (the backend refused: bad key material, backend not
   * configured, label taken meanwhile, …) `key.create_refused` naming the
   * refusal's code and message, so that every `key.create` is closed — by
   * that row or by the caller's `key.put` of the key made. `make`'s error is
   * rethrown. Should the refusal row itself fail to be written (the database
   * gone since the first row), the caller still gets the refusal: no key was
   * made either way.
   */
  async creating<T>(
    k: { label: string; backend: string; scheme: string },
    actor: string,
    make: () => Promise<T>,
  ): Promise<T> {
    await this.noteCreation(k, actor);
    try {
      return await make();
    } catch (e) {
      const refusal =
        e instanceof KeyError
          ? { code: e.code, reason: e.message }
          : { code: 'internal', reason: `internal error (${e instanceof Error ? e.name : typeof e})` };
      await appendAudit(this.db, {
        actor,
        action: 'key.create_refused',
        subject: `key:${k.label}`,
        details: { backend: k.backend, scheme: k.scheme, ...refusal },
      }).catch(() => {});
      throw e;
    }
  }

  /** Inserts or refreshes a key's metadata (audited as `key.put`, with `reason` when given). */
  async put(k: KeyMetadataInput, actor?: string, reason?: string): Promise<KeyMetadata> {
    const spki =
      typeof k.publicKeySpki === 'string' ? k.publicKeySpki : Buffer.from(k.publicKeySpki).toString('base64');
    const createdAt = k.createdAt ? k.createdAt : null;
    return this.db.transaction(async (tx) => {
      const r = await tx.query<Row>(
        `INSERT INTO keys (label, backend, scheme, fingerprint, public_key_spki, created_at, disabled)
         VALUES ($1, $2, $3, $4, $5, COALESCE($6::timestamptz, now()), $7)
         ON CONFLICT (label) DO UPDATE SET backend = EXCLUDED.backend, scheme = EXCLUDED.scheme,
           fingerprint = EXCLUDED.fingerprint, public_key_spki = EXCLUDED.public_key_spki,
           disabled = EXCLUDED.disabled, updated_at = now()
         RETURNING *`,
        [k.label, k.backend, k.scheme, k.fingerprint, spki, createdAt, k.disabled ?? false],
      );
      const row = fromRow(r.rows[0]!);
      await appendAudit(tx, {
        actor: actor ?? this.opts.actor ?? 'system',
        action: 'key.put',
        subject: `key:${row.label}`,
        details: {
          backend: row.backend,
          scheme: row.scheme,
          fingerprint: row.fingerprint,
          disabled: row.disabled,
          ...(reason !== undefined ? { reason } : {}),
        },
      });
      return row;
    });
  }

  async get(label: string): Promise<KeyMetadata | undefined> {
    const r = await this.db.query<Row>('SELECT * FROM keys WHERE label = $1', [label]);
    return r.rows[0] ? fromRow(r.rows[0]) : undefined;
  }

  async byFingerprint(fingerprint: string): Promise<KeyMetadata[]> {
    const r = await this.db.query<Row>('SELECT * FROM keys WHERE fingerprint = $1 ORDER BY label', [
      fingerprint,
    ]);
    return r.rows.map(fromRow);
  }

  async list(): Promise<KeyMetadata[]> {
    const r = await this.db.query<Row>('SELECT * FROM keys ORDER BY created_at, label');
    return r.rows.map(fromRow);
  }

  /**
   * Brings the table in line with the keys a signer holds: each key missing
   * from the table, or described differently (another fingerprint, backend,
   * scheme or disabled state: the keystore is the truth), is put (audited as
   * `key.put`, with `reason`). Returns the labels put. Rows of keys the signer
   * no longer holds stay: the audit trail refers to them.
   */
  async recordHeld(held: readonly KeyMetadataInput[], actor: string, reason: string): Promise<string[]> {
    const known = new Map((await this.list()).map((k) => [k.label, k]));
    const put: string[] = [];
    for (const k of held) {
      const row = known.get(k.label);
      if (
        row &&
        row.fingerprint === k.fingerprint &&
        row.backend === k.backend &&
        row.scheme === k.scheme &&
        row.disabled === (k.disabled ?? false)
      )
        continue;
      await this.put(k, actor, reason);
      put.push(k.label);
    }
    return put;
  }

  /** Marks a key disabled / enabled (audited as `key.disable` / `key.enable`). */
  async setDisabled(label: string, disabled: boolean, actor?: string): Promise<KeyMetadata> {
    return this.db.transaction(async (tx) => {
      const r = await tx.query<Row>(
        'UPDATE keys SET disabled = $2, updated_at = now() WHERE label = $1 RETURNING *',
        [label, disabled],
      );
      if (!r.rows[0]) throw new NotFoundError(`key ${label}`);
      await appendAudit(tx, {
        actor: actor ?? this.opts.actor ?? 'system',
        action: disabled ? 'key.disable' : 'key.enable',
        subject: `key:${label}`,
        details: {},
      });
      return fromRow(r.rows[0]);
    });
  }
}
