/**
 * DbPartyBook: the PartyBook interface (src/store/parties.ts) on the
 * database's `parties` table. `put` replaces the record and is audited
 * (`party.put`). Timestamps come back as ISO-8601 UTC with milliseconds.
 *
 * `get` is on every signing path, so records are cached per database handle
 * (shared by every DbPartyBook on it; `put` through any of them refreshes the
 * entry) for `PARTY_CACHE_MS`. Another instance's `put` is seen here within
 * that time. A stale entry cannot make a wrong signature pass: the key a
 * party's namespace is derived from is fixed by its id, and every signature
 * is verified against the registered key and the party's fingerprint.
 */
import { appendAudit } from '../audit.js';
import type { Db } from '../db.js';
import type { PartyBook, PartyRecord } from '../parties.js';

interface Row {
  party_id: string;
  hint: string;
  key_label: string;
  scheme: PartyRecord['scheme'];
  fingerprint: string;
  public_key_spki: string;
  via: PartyRecord['via'];
  participant_uid: string | null;
  synchronizer_id: string | null;
  ans_name: string | null;
  created_at: string;
}

function fromRow(r: Row): PartyRecord {
  const p: PartyRecord = {
    partyId: r.party_id,
    hint: r.hint,
    keyLabel: r.key_label,
    scheme: r.scheme,
    fingerprint: r.fingerprint,
    publicKeySpki: r.public_key_spki,
    via: r.via,
    createdAt: r.created_at,
  };
  if (r.participant_uid !== null) p.participantUid = r.participant_uid;
  if (r.synchronizer_id !== null) p.synchronizerId = r.synchronizer_id;
  if (r.ans_name !== null) p.ansName = r.ans_name;
  return p;
}

/** How long a looked-up party record is reused without asking the database (ms). */
export const PARTY_CACHE_MS = 10_000;
const CACHE_MAX = 10_000;

type Cache = Map<string, { record: PartyRecord; until: number }>;
const CACHES = new WeakMap<Db, Cache>();

function cacheOf(db: Db): Cache {
  let c = CACHES.get(db);
  if (!c) {
    c = new Map();
    CACHES.set(db, c);
  }
  return c;
}

export class DbPartyBook implements PartyBook {
  private readonly cache: Cache;
  constructor(
    private readonly db: Db,
    private readonly opts: { actor?: string; cacheMs?: number } = {},
  ) {
    this.cache = cacheOf(db);
  }

  async get(partyId: string): Promise<PartyRecord | undefined> {
    const now = Date.now();
    const hit = (this.opts.cacheMs ?? PARTY_CACHE_MS) > 0 ? this.cache.get(partyId) : undefined;
    if (hit && hit.until > now) return structuredClone(hit.record);
    const r = await this.db.query<Row>('SELECT * FROM parties WHERE party_id = $1', [partyId]);
    if (!r.rows[0]) return undefined;
    const record = fromRow(r.rows[0]);
    this.remember(record, now);
    return structuredClone(record);
  }

  private remember(record: PartyRecord, now = Date.now()): void {
    const ms = this.opts.cacheMs ?? PARTY_CACHE_MS;
    if (ms <= 0) return;
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(record.partyId, { record: structuredClone(record), until: now + ms });
  }

  async list(): Promise<PartyRecord[]> {
    const r = await this.db.query<Row>('SELECT * FROM parties ORDER BY created_at, party_id');
    return r.rows.map(fromRow);
  }

  async put(p: PartyRecord): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO parties (party_id, hint, key_label, scheme, fingerprint, public_key_spki, via,
           participant_uid, synchronizer_id, ans_name, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         ON CONFLICT (party_id) DO UPDATE SET hint = EXCLUDED.hint, key_label = EXCLUDED.key_label,
           scheme = EXCLUDED.scheme, fingerprint = EXCLUDED.fingerprint,
           public_key_spki = EXCLUDED.public_key_spki, via = EXCLUDED.via,
           participant_uid = EXCLUDED.participant_uid, synchronizer_id = EXCLUDED.synchronizer_id,
           ans_name = EXCLUDED.ans_name, created_at = EXCLUDED.created_at`,
        [
          p.partyId,
          p.hint,
          p.keyLabel,
          p.scheme,
          p.fingerprint,
          p.publicKeySpki,
          p.via,
          p.participantUid ?? null,
          p.synchronizerId ?? null,
          p.ansName ?? null,
          p.createdAt,
        ],
      );
      await appendAudit(tx, {
        actor: this.opts.actor ?? 'system',
        action: 'party.put',
        subject: `party:${p.partyId}`,
        details: { keyLabel: p.keyLabel, fingerprint: p.fingerprint, scheme: p.scheme, via: p.via },
      });
    });
    this.cache.delete(p.partyId);
  }
}
