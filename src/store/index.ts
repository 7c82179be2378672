/**
 * The service's persistence: open the database (PGlite or
 * PostgreSQL), migrate it, and the repositories over it. `openStore` is the
 * one call a service needs.
 */
import { type Db, type OpenDatabaseOptions, openDatabase } from './db.js';
import { AirGapRepo } from './repos/air-gap.js';
import { ApprovalRepo } from './repos/approvals.js';
import { ArtifactRepo } from './repos/artifacts.js';
import { DepositRepo } from './repos/deposits.js';
import { EventRepo } from './repos/events.js';
import { KeyRepo } from './repos/keys.js';
import { LeaseRepo } from './repos/leases.js';
import { LedgerRepo } from './repos/ledger.js';
import { NameRepo } from './repos/names.js';
import { DbPartyBook } from './repos/parties.js';
import { PolicyRepo } from './repos/policy.js';
import { DbRecorder } from './repos/recorder.js';
import { SessionRepo } from './repos/sessions.js';
import { WebhookRepo } from './repos/webhooks.js';
import { WithdrawalRepo } from './repos/withdrawals.js';

export * from './audit.js';
export * from './canonical.js';
export * from './db.js';
export * from './errors.js';
export * from './migrations.js';
export * from './repos/air-gap.js';
export * from './repos/approvals.js';
export * from './repos/artifacts.js';
export * from './repos/deposits.js';
export * from './repos/events.js';
export * from './repos/keys.js';
export * from './repos/leases.js';
export * from './repos/ledger.js';
export * from './repos/names.js';
export * from './repos/parties.js';
export * from './repos/policy.js';
export * from './repos/recorder.js';
export * from './repos/sessions.js';
export * from './repos/webhooks.js';
export * from './repos/withdrawals.js';

export interface Store {
  db: Db;
  withdrawals: WithdrawalRepo;
  keys: KeyRepo;
  parties: DbPartyBook;
  artifacts: ArtifactRepo;
  airGap: AirGapRepo;
  recorder: DbRecorder;
  policy: PolicyRepo;
  approvals: ApprovalRepo;
  /** The event outbox (webhooks, `GET /v1/events`). */
  events: EventRepo;
  leases: LeaseRepo;
  /** What ledger ingestion keeps: cursor, update ids, holdings, movements. */
  ledger: LedgerRepo;
  deposits: DepositRepo;
  /** The webhook deliverer's cursors and deliveries. */
  webhooks: WebhookRepo;
  /** Console sign-in sessions. */
  sessions: SessionRepo;
  /** Names of the book's parties (name-service entries). */
  names: NameRepo;
  close(): Promise<void>;
}

/** Opens (and migrates) the database and builds the repositories; `actor` is the default audit actor. */
export async function openStore(opts: OpenDatabaseOptions & { actor?: string } = {}): Promise<Store> {
  const db = await openDatabase(opts);
  return storeOn(db, opts.actor);
}

/** The repositories over an open, migrated database. */
export function storeOn(db: Db, actor = 'system'): Store {
  return {
    db,
    withdrawals: new WithdrawalRepo(db, { actor }),
    keys: new KeyRepo(db, { actor }),
    parties: new DbPartyBook(db, { actor }),
    artifacts: new ArtifactRepo(db),
    airGap: new AirGapRepo(db, { actor }),
    recorder: new DbRecorder(db, { actor }),
    policy: new PolicyRepo(db, { actor }),
    approvals: new ApprovalRepo(db, { actor }),
    events: new EventRepo(db),
    leases: new LeaseRepo(db),
    ledger: new LedgerRepo(db),
    deposits: new DepositRepo(db, { actor }),
    webhooks: new WebhookRepo(db, { actor }),
    sessions: new SessionRepo(db),
    names: new NameRepo(db, { actor }),
    close: () => db.close(),
  };
}
