/**
 * The database schema, as numbered migrations, and the runner that applies
 * them. Migrations are append-only: a released migration is never edited
 * (its checksum is recorded in `schema_migrations` and checked at every
 * start); a change is a new migration. The runner applies every pending
 * migration, in order, in ONE transaction, after taking a transaction-scoped
 * advisory lock, so that several instances starting at once against one
 * PostgreSQL apply each migration exactly once (PGlite supports the same
 * lock; it has a single session anyway). A database migrated by a newer
 * build (an unknown version) is refused rather than used.
 *
 * Tables (migration 1):
 * - keys: key METADATA only (label, backend, scheme, fingerprint, public key
 *   SPKI base64, created_at, disabled). No column may ever hold private key
 *   material, passphrases or PINs; a test asserts the column list.
 * - parties: the PartyRecord fields (see parties.ts).
 * - withdrawals: one row per accepted withdrawal request; the state machine
 *   is documented in repos/withdrawal-states.ts and enforced twice, by the
 *   repository and by the trigger `withdrawals_guard` (which also refuses
 *   changes to the request columns).
 * - prepared_transactions, signatures, submissions: the evidence of each
 *   attempt (hash and bytes prepared, signature made, submission outcome).
 * - audit_log + audit_head: the hash chain (see audit.ts); audit_log is
 *   append-only (UPDATE, DELETE and TRUNCATE raise).
 * Migration 2 adds the withdrawal worker's lease and lookup offset.
 * Migration 3 adds the air-gap exports and the awaiting_signature state.
 * Migration 4 adds prepared_transactions.bytes_raw: new rows keep the
 * prepared transaction as bytes there (bytea: a quarter smaller than base64,
 * and it compresses better), with `bytes` (base64 text) left NULL; rows
 * written before, or by an instance of an older build during a rolling
 * upgrade, keep `bytes`. Exactly one of the two is set; readers take either.
 * (Converting the column in place would have made older instances store the
 * base64 characters as bytes.) It also indexes the unfinished withdrawals of
 * each party, which the worker's claim asks for at every claim: without it,
 * a planner without statistics read the party's whole history.
 * Migration 6 adds where a committed withdrawal's funds are (`delivery`, a
 * second state machine documented in repos/withdrawal-states.ts) and the transfer
 * offer it is waiting on.
 * Migration 7 adds policies and approvals: the policy versions
 * (`policy_versions`, at most one in force), what each limit's window holds
 * (`policy_usage`, reserved by the plpgsql function `policy_reserve` under
 * advisory locks on the limit keys, settled by `policy_settle`), approval
 * requests (at most one pending per subject) with the approvals given, the
 * approvers' credentials, and the withdrawal state `awaiting_approval`
 * (repos/policy.ts, repos/approvals.ts, repos/withdrawals.ts).
 * Migration 8 adds the event outbox (`events`: what happened, written in the
 * transaction of the change itself, numbered without gaps in commit order;
 * append-only) and named leases (`leases`: one holder at a time of a task
 * that must not run twice, with a fencing number that grows at each change
 * of holder) (repos/events.ts, repos/leases.ts).
 * Migration 10 adds the webhook deliverer's cursors (`webhook_receivers`)
 * and deliveries (`webhook_deliveries`, src/store/repos/webhooks.ts).
 *
 * One file on purpose: the migrations are one ordered, append-only list whose
 * order and checksums are the schema's history, and the runner that applies
 * them is short and reads only that list.
 */
import { createHash } from 'node:crypto';
import type { Db } from './db.js';
import { StoreError } from './errors.js';

export interface Migration {
  version: number;
  name: string;
  /** One statement per entry (the extended protocol both drivers use takes one statement at a time). */
  statements: readonly string[];
}

const SCHEMES = `('ed25519', 'ecdsa-p256', 'ecdsa-secp256k1', 'ecdsa-p384')`;
const HEX64 = `'^[0-9a-f]{64}$'`;

const M001: Migration = {
  version: 1,
  name: 'initial schema',
  statements: [
    `CREATE TABLE keys (
      label           text PRIMARY KEY CHECK (label ~ '^[A-Za-z0-9._-]{1,200}$'),
      backend         text NOT NULL CHECK (backend IN ('file', 'pkcs11')),
      scheme          text NOT NULL CHECK (scheme IN ${SCHEMES}),
      fingerprint     text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{68}$'),
      public_key_spki text NOT NULL,
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      disabled        boolean NOT NULL DEFAULT false,
      updated_at      timestamptz(3) NOT NULL DEFAULT now()
    )`,
    `CREATE INDEX keys_fingerprint ON keys (fingerprint)`,
    `CREATE TABLE parties (
      party_id        text PRIMARY KEY,
      hint            text NOT NULL,
      key_label       text NOT NULL,
      scheme          text NOT NULL CHECK (scheme IN ${SCHEMES}),
      fingerprint     text NOT NULL,
      public_key_spki text NOT NULL,
      via             text NOT NULL CHECK (via IN ('validator', 'ledger-api')),
      participant_uid text,
      synchronizer_id text,
      ans_name        text,
      created_at      timestamptz(3) NOT NULL
    )`,
    `CREATE INDEX parties_key_label ON parties (key_label)`,
    `CREATE TABLE withdrawals (
      id              uuid PRIMARY KEY,
      caller          text NOT NULL,
      idempotency_key text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
      request_hash    text NOT NULL CHECK (request_hash ~ ${HEX64}),
      party           text NOT NULL,
      receiver        text NOT NULL,
      amount          numeric(38, 10) NOT NULL CHECK (amount > 0),
      instrument_admin text,
      instrument_id   text,
      memo            text,
      options         jsonb NOT NULL DEFAULT '{}',
      state           text NOT NULL DEFAULT 'received' CHECK (state IN
                        ('received', 'prepared', 'signed', 'submitted',
                         'committed', 'rejected', 'failed', 'cancelled', 'expired')),
      command_id      text NOT NULL UNIQUE,
      attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
      last_error      text,
      update_id       text,
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      updated_at      timestamptz(3) NOT NULL DEFAULT now(),
      UNIQUE (caller, idempotency_key),
      CHECK ((instrument_admin IS NULL) = (instrument_id IS NULL))
    )`,
    `CREATE INDEX withdrawals_page ON withdrawals (created_at, id)`,
    `CREATE INDEX withdrawals_party_page ON withdrawals (party, created_at, id)`,
    `CREATE INDEX withdrawals_unfinished ON withdrawals (created_at, id)
      WHERE state IN ('received', 'prepared', 'signed', 'submitted')`,
    `CREATE FUNCTION withdrawals_guard() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.id IS DISTINCT FROM OLD.id OR NEW.caller IS DISTINCT FROM OLD.caller
         OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
         OR NEW.request_hash IS DISTINCT FROM OLD.request_hash
         OR NEW.party IS DISTINCT FROM OLD.party OR NEW.receiver IS DISTINCT FROM OLD.receiver
         OR NEW.amount IS DISTINCT FROM OLD.amount
         OR NEW.instrument_admin IS DISTINCT FROM OLD.instrument_admin
         OR NEW.instrument_id IS DISTINCT FROM OLD.instrument_id
         OR NEW.memo IS DISTINCT FROM OLD.memo OR NEW.options IS DISTINCT FROM OLD.options
         OR NEW.command_id IS DISTINCT FROM OLD.command_id
         OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'withdrawal %: the request columns are immutable', OLD.id
          USING ERRCODE = 'check_violation';
      END IF;
      IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT (
             (OLD.state = 'received'  AND NEW.state IN ('prepared', 'rejected', 'failed', 'cancelled', 'expired'))
          OR (OLD.state = 'prepared'  AND NEW.state IN ('prepared', 'signed', 'rejected', 'failed', 'cancelled', 'expired'))
          OR (OLD.state = 'signed'    AND NEW.state IN ('submitted', 'prepared', 'failed', 'expired'))
          OR (OLD.state = 'submitted' AND NEW.state IN ('submitted', 'committed', 'rejected', 'expired', 'prepared'))
        ) THEN
          RAISE EXCEPTION 'withdrawal %: % -> % is not an allowed transition', OLD.id, OLD.state, NEW.state
            USING ERRCODE = 'check_violation';
        END IF;
      END IF;
      RETURN NEW;
    END $$`,
    `CREATE TRIGGER withdrawals_guard BEFORE UPDATE ON withdrawals
      FOR EACH ROW EXECUTE FUNCTION withdrawals_guard()`,
    `CREATE TABLE prepared_transactions (
      id              uuid PRIMARY KEY,
      withdrawal_id   uuid REFERENCES withdrawals (id),
      request_id      text,
      attempt         integer NOT NULL DEFAULT 0,
      hash            text NOT NULL CHECK (hash ~ ${HEX64}),
      hashing_scheme  text NOT NULL CHECK (hashing_scheme ~ '^v[0-9]+$'),
      bytes           text NOT NULL,
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      CHECK (withdrawal_id IS NOT NULL OR request_id IS NOT NULL)
    )`,
    `CREATE INDEX prepared_by_withdrawal ON prepared_transactions (withdrawal_id, created_at)`,
    `CREATE INDEX prepared_by_request ON prepared_transactions (request_id)`,
    `CREATE TABLE signatures (
      id              uuid PRIMARY KEY,
      prepared_id     uuid REFERENCES prepared_transactions (id),
      withdrawal_id   uuid REFERENCES withdrawals (id),
      hash            text NOT NULL CHECK (hash ~ '^([0-9a-f]{2})+$'),
      signed_by       text NOT NULL,
      key_label       text NOT NULL,
      scheme          text NOT NULL CHECK (scheme IN ${SCHEMES}),
      signature_format text NOT NULL,
      signature       text NOT NULL,
      created_at      timestamptz(3) NOT NULL DEFAULT now()
    )`,
    `CREATE INDEX signatures_hash ON signatures (hash)`,
    `CREATE INDEX signatures_by_withdrawal ON signatures (withdrawal_id)`,
    `CREATE TABLE submissions (
      submission_id   text PRIMARY KEY,
      command_id      text NOT NULL,
      withdrawal_id   uuid REFERENCES withdrawals (id),
      prepared_id     uuid REFERENCES prepared_transactions (id),
      outcome         text NOT NULL DEFAULT 'pending' CHECK (outcome IN
                        ('pending', 'committed', 'rejected', 'ambiguous', 'expired')),
      ledger_end_before bigint,
      completion_offset bigint,
      update_id       text,
      reason          text,
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      updated_at      timestamptz(3) NOT NULL DEFAULT now()
    )`,
    `CREATE INDEX submissions_by_command ON submissions (command_id, created_at)`,
    `CREATE TABLE audit_log (
      seq             bigint PRIMARY KEY CHECK (seq > 0),
      at              timestamptz(3) NOT NULL,
      actor           text NOT NULL,
      action          text NOT NULL,
      subject         text,
      details         jsonb NOT NULL,
      prev_hash       text NOT NULL CHECK (prev_hash ~ ${HEX64}),
      hash            text NOT NULL CHECK (hash ~ ${HEX64})
    )`,
    `CREATE INDEX audit_log_subject ON audit_log (subject, seq)`,
    `CREATE TABLE audit_head (
      id              boolean PRIMARY KEY DEFAULT true CHECK (id),
      seq             bigint NOT NULL,
      hash            text NOT NULL CHECK (hash ~ ${HEX64})
    )`,
    `INSERT INTO audit_head (id, seq, hash) VALUES (true, 0, '${'0'.repeat(64)}')`,
    `CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'audit_log is append-only (% refused)', TG_OP USING ERRCODE = 'insufficient_privilege';
    END $$`,
    `CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
      FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()`,
    `CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
      FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only()`,
  ],
};

/**
 * Migration 2: the withdrawal worker's lease (several service instances share
 * one PostgreSQL; a withdrawal is carried by the instance holding an unexpired
 * lease) and `lookup_from`, the ledger end read before the first submission:
 * where a resumed worker starts reading completions for the command id.
 */
const M002: Migration = {
  version: 2,
  name: 'withdrawal lease and lookup offset',
  statements: [
    `ALTER TABLE withdrawals ADD COLUMN lease_owner text`,
    `ALTER TABLE withdrawals ADD COLUMN lease_until timestamptz(3)`,
    `ALTER TABLE withdrawals ADD COLUMN lookup_from bigint CHECK (lookup_from >= 0)`,
  ],
};

/**
 * Migration 3: air-gapped signing. A withdrawal of a party whose key
 * is held offline waits in `awaiting_signature` while its signing request is
 * across the gap; `air_gap_exports` holds each sealed request (nonce and
 * digest unique: a response is accepted once), the hashes it asks to be
 * signed and, once imported, the response. The transition guard gains the new
 * state's edges.
 */
const M003: Migration = {
  version: 3,
  name: 'air-gap exports and the awaiting_signature state',
  statements: [
    `ALTER TABLE keys DROP CONSTRAINT keys_backend_check`,
    `ALTER TABLE keys ADD CONSTRAINT keys_backend_check CHECK (backend IN ('file', 'pkcs11', 'offline'))`,
    `ALTER TABLE withdrawals DROP CONSTRAINT withdrawals_state_check`,
    `ALTER TABLE withdrawals ADD CONSTRAINT withdrawals_state_check CHECK (state IN
      ('received', 'prepared', 'signed', 'submitted', 'awaiting_signature',
       'committed', 'rejected', 'failed', 'cancelled', 'expired'))`,
    `CREATE OR REPLACE FUNCTION withdrawals_guard() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.id IS DISTINCT FROM OLD.id OR NEW.caller IS DISTINCT FROM OLD.caller
         OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
         OR NEW.request_hash IS DISTINCT FROM OLD.request_hash
         OR NEW.party IS DISTINCT FROM OLD.party OR NEW.receiver IS DISTINCT FROM OLD.receiver
         OR NEW.amount IS DISTINCT FROM OLD.amount
         OR NEW.instrument_admin IS DISTINCT FROM OLD.instrument_admin
         OR NEW.instrument_id IS DISTINCT FROM OLD.instrument_id
         OR NEW.memo IS DISTINCT FROM OLD.memo OR NEW.options IS DISTINCT FROM OLD.options
         OR NEW.command_id IS DISTINCT FROM OLD.command_id
         OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'withdrawal %: the request columns are immutable', OLD.id
          USING ERRCODE = 'check_violation';
      END IF;
      IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT (
             (OLD.state = 'received'  AND NEW.state IN ('prepared', 'rejected', 'failed', 'cancelled', 'expired'))
          OR (OLD.state = 'prepared'  AND NEW.state IN ('prepared', 'signed', 'awaiting_signature', 'rejected', 'failed', 'cancelled', 'expired'))
          OR (OLD.state = 'awaiting_signature' AND NEW.state IN ('prepared', 'rejected', 'failed', 'cancelled', 'expired'))
          OR (OLD.state = 'signed'    AND NEW.state IN ('submitted', 'prepared', 'failed', 'expired'))
          OR (OLD.state = 'submitted' AND NEW.state IN ('submitted', 'committed', 'rejected', 'expired', 'prepared'))
        ) THEN
          RAISE EXCEPTION 'withdrawal %: % -> % is not an allowed transition', OLD.id, OLD.state, NEW.state
            USING ERRCODE = 'check_violation';
        END IF;
      END IF;
      RETURN NEW;
    END $$`,
    `CREATE TABLE air_gap_exports (
      id              uuid PRIMARY KEY,
      nonce           text NOT NULL UNIQUE CHECK (nonce ~ ${HEX64}),
      digest          text NOT NULL UNIQUE CHECK (digest ~ ${HEX64}),
      kind            text NOT NULL CHECK (kind IN ('prepared-transaction', 'topology-transactions')),
      party           text NOT NULL,
      key_fingerprint text NOT NULL,
      hashes          jsonb NOT NULL,
      withdrawal_id   uuid REFERENCES withdrawals (id),
      subject         text NOT NULL,
      context         jsonb NOT NULL DEFAULT '{}',
      envelope        jsonb NOT NULL,
      window_latest   timestamptz(3) NOT NULL,
      status          text NOT NULL DEFAULT 'open' CHECK (status IN
                        ('open', 'imported', 'stale', 'cancelled', 'done')),
      response        jsonb,
      imported_at     timestamptz(3),
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      updated_at      timestamptz(3) NOT NULL DEFAULT now(),
      CHECK (status NOT IN ('imported', 'done') OR response IS NOT NULL)
    )`,
    `CREATE INDEX withdrawals_awaiting ON withdrawals (created_at, id) WHERE state = 'awaiting_signature'`,
    `CREATE INDEX air_gap_by_withdrawal ON air_gap_exports (withdrawal_id, created_at)`,
    `CREATE INDEX air_gap_by_status ON air_gap_exports (status, created_at, id)`,
    `CREATE INDEX air_gap_by_key ON air_gap_exports (key_fingerprint, status)`,
    `CREATE UNIQUE INDEX air_gap_one_open_per_withdrawal ON air_gap_exports (withdrawal_id)
      WHERE status IN ('open', 'imported') AND withdrawal_id IS NOT NULL`,
  ],
};

const M004: Migration = {
  version: 4,
  name: 'prepared transactions as bytes; unfinished withdrawals by party',
  statements: [
    `ALTER TABLE prepared_transactions ADD COLUMN bytes_raw bytea`,
    `ALTER TABLE prepared_transactions ALTER COLUMN bytes DROP NOT NULL`,
    `ALTER TABLE prepared_transactions ADD CONSTRAINT prepared_transactions_one_bytes
      CHECK ((bytes IS NULL) <> (bytes_raw IS NULL))`,
    `CREATE INDEX withdrawals_unfinished_party ON withdrawals (party)
      WHERE state IN ('received', 'prepared', 'signed', 'submitted')`,
  ],
};

const M005: Migration = {
  version: 5,
  name: 'the commit deadline of each submission',
  statements: [
    // The latest record time at which the submitted transaction could still commit, from the
    // bounds its signature covers (window.ts `commitDeadlineUs`). NULL for rows of older builds.
    `ALTER TABLE submissions ADD COLUMN commit_deadline timestamptz(3)`,
  ],
};

/**
 * Migration 6: delivery. A committed withdrawal may have delivered the funds
 * (one step) or only offered them (a transfer instruction the receiver must
 * accept): `delivery` says which and follows an offer to its end; its own
 * trigger enforces its edges (repos/withdrawal-states.ts `DELIVERY_EDGES`). Rows
 * committed before keep NULL: not tracked.
 */
const M006: Migration = {
  version: 6,
  name: 'withdrawal delivery and transfer offers',
  statements: [
    `ALTER TABLE withdrawals ADD COLUMN delivery text CHECK (delivery IN ('pending', 'delivered', 'offered', 'returned'))`,
    `ALTER TABLE withdrawals ADD COLUMN offer_cid text`,
    `ALTER TABLE withdrawals ADD COLUMN offer_expires_at timestamptz(3)`,
    `ALTER TABLE withdrawals ADD COLUMN offer_outcome text CHECK (offer_outcome IN
      ('accepted', 'rejected', 'expired', 'withdrawn', 'failed'))`,
    `ALTER TABLE withdrawals ADD COLUMN delivery_update_id text`,
    `ALTER TABLE withdrawals ADD COLUMN delivery_from bigint CHECK (delivery_from >= 0)`,
    `ALTER TABLE withdrawals ADD CONSTRAINT withdrawals_delivery_committed
      CHECK (delivery IS NULL OR state = 'committed')`,
    `CREATE FUNCTION withdrawals_delivery_guard() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.delivery IS DISTINCT FROM OLD.delivery AND NOT (
           (OLD.delivery IS NULL      AND NEW.delivery = 'pending')
        OR (OLD.delivery = 'pending'  AND NEW.delivery IN ('delivered', 'offered', 'returned'))
        OR (OLD.delivery = 'offered'  AND NEW.delivery IN ('delivered', 'returned'))
      ) THEN
        RAISE EXCEPTION 'withdrawal %: delivery % -> % is not an allowed transition', OLD.id,
          coalesce(OLD.delivery, 'none'), coalesce(NEW.delivery, 'none')
          USING ERRCODE = 'check_violation';
      END IF;
      RETURN NEW;
    END $$`,
    `CREATE TRIGGER withdrawals_delivery_guard BEFORE UPDATE ON withdrawals
      FOR EACH ROW EXECUTE FUNCTION withdrawals_delivery_guard()`,
    `CREATE INDEX withdrawals_delivery_open ON withdrawals (created_at, id)
      WHERE delivery IN ('pending', 'offered')`,
  ],
};

const M012: Migration = {
  version: 12,
  name: 'console sign-in sessions; one credential per authenticator key',
  statements: [
    // A session is found by the SHA-256 of its cookie value: the database never holds a usable cookie.
    `CREATE TABLE console_sessions (
      id_hash         text PRIMARY KEY CHECK (id_hash ~ ${HEX64}),
      principal       jsonb NOT NULL CHECK (jsonb_typeof(principal) = 'object'),
      csrf            text NOT NULL CHECK (length(csrf) BETWEEN 32 AND 128),
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      last_seen       timestamptz(3) NOT NULL DEFAULT now(),
      expires_at      timestamptz(3) NOT NULL,
      ended_at        timestamptz(3),
      CHECK (expires_at > created_at)
    )`,
    `CREATE INDEX console_sessions_expiry ON console_sessions (expires_at)`,
    // One authenticator key, one credential, ever, whatever its kind: a passkey registration
    // (attestation "none") proves no possession, so the same public key under a second credential
    // id would let one person's assertion count for another approver.
    `CREATE UNIQUE INDEX approver_credentials_raw_key ON approver_credentials
      ((CASE WHEN kind = 'webauthn' THEN public_key::jsonb ->> 'publicKey' ELSE public_key END))`,
    `CREATE UNIQUE INDEX approver_credentials_passkey_id ON approver_credentials
      ((public_key::jsonb ->> 'credentialId')) WHERE kind = 'webauthn'`,
  ],
};

/**
 * Migration 7: policies and approvals.
 * - policy_versions: each policy document as loaded (its exact text and
 *   SHA-256), numbered from 1; at most one `in_force` (partial unique index).
 * - policy_usage: what each limit's window holds, one row per (subject,
 *   limit key): `reserved` while the subject (a withdrawal, a command) is on
 *   its way, `committed` once it happened, `released` when it did not.
 *   `policy_reserve` (below) writes it under a transaction-scoped advisory
 *   lock on each limit key, so that two instances never both fit the last
 *   room of one limit; `seq` is the order of those writes (drawn under the
 *   locks), `policy_settle` moves a subject's reserved rows on.
 * - approval_requests (at most one pending per subject), approvals (one per
 *   approver and request; append-only), approver_credentials (a public key
 *   per approver, pending until an admin activates it: `seal`).
 * - withdrawals gain `awaiting_approval` (received → awaiting_approval,
 *   prepared → awaiting_approval, awaiting_approval → prepared | rejected |
 *   failed | cancelled | expired): the guard is replaced with the new edges.
 */
const M007: Migration = {
  version: 7,
  name: 'policies, limits and approvals; the awaiting_approval state',
  statements: [
    `ALTER TABLE withdrawals DROP CONSTRAINT withdrawals_state_check`,
    `ALTER TABLE withdrawals ADD CONSTRAINT withdrawals_state_check CHECK (state IN
      ('received', 'prepared', 'signed', 'submitted', 'awaiting_signature', 'awaiting_approval',
       'committed', 'rejected', 'failed', 'cancelled', 'expired'))`,
    `CREATE OR REPLACE FUNCTION withdrawals_guard() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.id IS DISTINCT FROM OLD.id OR NEW.caller IS DISTINCT FROM OLD.caller
         OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
         OR NEW.request_hash IS DISTINCT FROM OLD.request_hash
         OR NEW.party IS DISTINCT FROM OLD.party OR NEW.receiver IS DISTINCT FROM OLD.receiver
         OR NEW.amount IS DISTINCT FROM OLD.amount
         OR NEW.instrument_admin IS DISTINCT FROM OLD.instrument_admin
         OR NEW.instrument_id IS DISTINCT FROM OLD.instrument_id
         OR NEW.memo IS DISTINCT FROM OLD.memo OR NEW.options IS DISTINCT FROM OLD.options
         OR NEW.command_id IS DISTINCT FROM OLD.command_id
         OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'withdrawal %: the request columns are immutable', OLD.id
          USING ERRCODE = 'check_violation';
      END IF;
      IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT (
             (OLD.state = 'received'  AND NEW.state IN ('prepared', 'awaiting_approval', 'rejected', 'failed', 'cancelled', 'expired'))
          OR (OLD.state = 'prepared'  AND NEW.state IN ('prepared', 'signed', 'awaiting_signature', 'awaiting_approval', 'rejected', 'failed', 'cancelled', 'expired'))
          OR (OLD.state = 'awaiting_signature' AND NEW.state IN ('prepared', 'rejected', 'failed', 'cancelled', 'expired'))
          OR (OLD.state = 'awaiting_approval' AND NEW.state IN ('prepared', 'rejected', 'failed', 'cancelled', 'expired'))
          OR (OLD.state = 'signed'    AND NEW.state IN ('submitted', 'prepared', 'failed', 'expired'))
          OR (OLD.state = 'submitted' AND NEW.state IN ('submitted', 'committed', 'rejected', 'expired', 'prepared'))
        ) THEN
          RAISE EXCEPTION 'withdrawal %: % -> % is not an allowed transition', OLD.id, OLD.state, NEW.state
            USING ERRCODE = 'check_violation';
        END IF;
      END IF;
      RETURN NEW;
    END $$`,
    `CREATE INDEX withdrawals_awaiting_approval ON withdrawals (created_at, id) WHERE state = 'awaiting_approval'`,
    // Who a party has paid (a policy's `newReceiver`): PolicyRepo.paidBefore reads committed withdrawals too.
    `CREATE INDEX withdrawals_paid ON withdrawals (party, receiver) WHERE state = 'committed'`,
    `CREATE TABLE policy_versions (
      version         integer PRIMARY KEY CHECK (version >= 1),
      sha256          text NOT NULL CHECK (sha256 ~ ${HEX64}),
      text            text NOT NULL,
      format          text NOT NULL CHECK (format IN ('yaml', 'json')),
      source          text NOT NULL CHECK (source IN ('file', 'api', 'builtin')),
      status          text NOT NULL CHECK (status IN ('in_force', 'pending', 'superseded', 'rejected')),
      created_by      text NOT NULL,
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      decided_at      timestamptz(3),
      seal            text,
      CHECK ((status = 'pending') = (decided_at IS NULL))
    )`,
    `CREATE UNIQUE INDEX policy_versions_one_in_force ON policy_versions ((true)) WHERE status = 'in_force'`,
    `CREATE SEQUENCE policy_usage_seq`,
    `CREATE TABLE policy_usage (
      subject         text NOT NULL,
      limit_key       text NOT NULL,
      limit_id        text NOT NULL,
      party           text NOT NULL,
      caller          text,
      receiver        text,
      amount          numeric(38, 10) NOT NULL CHECK (amount >= 0),
      count           integer NOT NULL CHECK (count >= 0),
      state           text NOT NULL CHECK (state IN ('reserved', 'committed', 'released')),
      at              timestamptz(3) NOT NULL,
      policy_version  integer NOT NULL CHECK (policy_version >= 0),
      seq             bigint NOT NULL,
      PRIMARY KEY (subject, limit_key)
    )`,
    `CREATE INDEX policy_usage_window ON policy_usage (limit_key, at) WHERE state <> 'released'`,
    `CREATE INDEX policy_usage_paid ON policy_usage (party, receiver) WHERE state = 'committed'`,
    `CREATE INDEX policy_usage_reserved ON policy_usage (subject) WHERE state = 'reserved'`,
    // Locks every limit key the call names or the subject holds a reservation under (sorted: two
    // calls never wait on each other crosswise), THEN sums: in READ COMMITTED each statement of a
    // VOLATILE function takes a new snapshot, so the sums see every reservation committed by the
    // holders of the locks before. The subject's own rows are left out (it is being re-evaluated).
    `CREATE FUNCTION policy_reserve(r jsonb) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      k          text;
      c          record;
      v_now      timestamptz;
      v_serial   bigint;
      v_fits     boolean := true;
      v_usage    jsonb := '{}'::jsonb;
      v_amount   numeric;
      v_count    bigint;
      v_in_force integer;
    BEGIN
      FOR k IN
        SELECT DISTINCT lk COLLATE "C" FROM (
          SELECT x->>'key' AS lk FROM jsonb_array_elements(r->'checks') AS x
          UNION ALL
          SELECT limit_key FROM policy_usage WHERE subject = r->>'subject' AND state = 'reserved'
        ) keys ORDER BY 1
      LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended(k, 0));
      END LOOP;
      v_serial := nextval('policy_usage_seq');
      v_now := date_trunc('milliseconds', clock_timestamp());
      FOR c IN
        SELECT * FROM jsonb_to_recordset(r->'checks')
          AS x(key text, "windowMs" bigint, "maxAmount" numeric, "maxCount" bigint, adding jsonb)
      LOOP
        SELECT coalesce(sum(u.amount), 0), coalesce(sum(u.count), 0) INTO v_amount, v_count
          FROM policy_usage u
         WHERE u.limit_key = c.key AND u.state <> 'released' AND u.subject <> r->>'subject'
           AND u.at > v_now - c."windowMs" * interval '1 millisecond';
        IF (c."maxAmount" IS NOT NULL AND v_amount + (c.adding->>'amount')::numeric > c."maxAmount")
           OR (c."maxCount" IS NOT NULL AND v_count + (c.adding->>'count')::bigint > c."maxCount") THEN
          v_fits := false;
        END IF;
        v_usage := v_usage || jsonb_build_object(c.key,
          jsonb_build_object('amount', v_amount::text, 'count', v_count));
      END LOOP;
      IF v_fits OR r->>'mode' = 'always' THEN
        -- The subject's reservation is replaced: keys it no longer counts towards are released.
        UPDATE policy_usage SET state = 'released', seq = v_serial
         WHERE subject = r->>'subject' AND state = 'reserved'
           AND limit_key NOT IN (SELECT x->>'key' FROM jsonb_array_elements(r->'checks') AS x);
        INSERT INTO policy_usage AS u (subject, limit_key, limit_id, party, caller, receiver, amount, count,
            state, at, policy_version, seq)
          SELECT r->>'subject', x.key, x."limit", r->>'party', r->>'caller', r->>'receiver',
                 (x.adding->>'amount')::numeric, (x.adding->>'count')::integer, 'reserved', v_now,
                 (r->>'policyVersion')::integer, v_serial
            FROM jsonb_to_recordset(r->'checks') AS x(key text, "limit" text, adding jsonb)
        ON CONFLICT (subject, limit_key) DO UPDATE SET limit_id = EXCLUDED.limit_id, party = EXCLUDED.party,
            caller = EXCLUDED.caller, receiver = EXCLUDED.receiver, amount = EXCLUDED.amount,
            count = EXCLUDED.count, state = 'reserved', at = EXCLUDED.at,
            policy_version = EXCLUDED.policy_version, seq = EXCLUDED.seq
          -- a committed row is final: what happened stays counted as it happened
          WHERE u.state <> 'committed';
      END IF;
      SELECT version INTO v_in_force FROM policy_versions WHERE status = 'in_force';
      RETURN jsonb_build_object('fits', v_fits, 'usage', v_usage, 'inForce', v_in_force, 'serial', v_serial);
    END $$`,
    `CREATE FUNCTION policy_settle(p_subject text, p_to text) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      k        text;
      v_keys   text[] := '{}';
      n        integer;
      v_serial bigint;
    BEGIN
      FOR k IN
        SELECT limit_key COLLATE "C" FROM policy_usage WHERE subject = p_subject AND state = 'reserved' ORDER BY 1
      LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended(k, 0));
        v_keys := v_keys || k;
      END LOOP;
      v_serial := nextval('policy_usage_seq');
      -- only under the keys locked: each write to a key's rows takes its turn on the key
      UPDATE policy_usage SET state = p_to, seq = v_serial
       WHERE subject = p_subject AND state = 'reserved' AND limit_key = ANY(v_keys);
      GET DIAGNOSTICS n = ROW_COUNT;
      RETURN n;
    END $$`,
    `CREATE TABLE approver_credentials (
      id              uuid PRIMARY KEY,
      approver        text NOT NULL CHECK (length(approver) BETWEEN 1 AND 1000),
      kind            text NOT NULL CHECK (kind IN ('ed25519', 'webauthn')),
      public_key      text NOT NULL,
      label           text CHECK (length(label) <= 200),
      status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'active', 'revoked')),
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      activated_by    text,
      activated_at    timestamptz(3),
      seal            text,
      UNIQUE (kind, public_key),
      CHECK (kind <> 'ed25519' OR public_key ~ ${HEX64}),
      CHECK (status <> 'active' OR (activated_by IS NOT NULL AND activated_at IS NOT NULL AND seal IS NOT NULL))
    )`,
    `CREATE INDEX approver_credentials_approver ON approver_credentials (approver, created_at)`,
    `CREATE TABLE approval_requests (
      id              uuid PRIMARY KEY,
      subject         text NOT NULL,
      statement       jsonb NOT NULL,
      statement_hash  text NOT NULL CHECK (statement_hash ~ ${HEX64}),
      party           text NOT NULL,
      requester       text NOT NULL,
      entry_point     text NOT NULL,
      policy_version  integer NOT NULL CHECK (policy_version >= 0),
      rule            text NOT NULL,
      requirement     jsonb NOT NULL CHECK (jsonb_typeof(requirement) = 'array'),
      status          text NOT NULL DEFAULT 'pending' CHECK (status IN
                        ('pending', 'approved', 'rejected', 'expired', 'superseded', 'cancelled')),
      expires_at      timestamptz(3) NOT NULL,
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      decided_at      timestamptz(3),
      decided_by      text,
      reason          text,
      resume          jsonb,
      result          jsonb,
      CHECK ((status = 'pending') = (decided_at IS NULL))
    )`,
    `CREATE UNIQUE INDEX approval_requests_one_pending ON approval_requests (subject) WHERE status = 'pending'`,
    `CREATE INDEX approval_requests_subject ON approval_requests (subject, created_at)`,
    `CREATE INDEX approval_requests_page ON approval_requests (created_at, id)`,
    `CREATE INDEX approval_requests_due ON approval_requests (expires_at) WHERE status = 'pending'`,
    `CREATE TABLE approvals (
      id              uuid PRIMARY KEY,
      request_id      uuid NOT NULL REFERENCES approval_requests (id),
      approver        text NOT NULL,
      credential_id   uuid REFERENCES approver_credentials (id),
      decision        text NOT NULL CHECK (decision IN ('approve', 'reject')),
      reason          text,
      signature       text,
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      UNIQUE (request_id, approver),
      CHECK (decision = 'reject' OR (credential_id IS NOT NULL AND signature IS NOT NULL))
    )`,
    // An approval given is evidence: it is never changed nor removed.
    `CREATE FUNCTION approvals_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'approvals are append-only (% refused)', TG_OP USING ERRCODE = 'insufficient_privilege';
    END $$`,
    `CREATE TRIGGER approvals_no_change BEFORE UPDATE OR DELETE ON approvals
      FOR EACH ROW EXECUTE FUNCTION approvals_append_only()`,
  ],
};

const M008: Migration = {
  version: 8,
  name: 'event outbox and named leases',
  statements: [
    `CREATE TABLE events (
      seq             bigint PRIMARY KEY CHECK (seq > 0),
      id              uuid NOT NULL UNIQUE,
      type            text NOT NULL CHECK (type ~ '^[a-z][a-z_]*(\\.[a-z][a-z_]*)+$'),
      subject         text NOT NULL CHECK (length(subject) BETWEEN 1 AND 600),
      data            jsonb NOT NULL,
      created_at      timestamptz(3) NOT NULL DEFAULT now()
    )`,
    `CREATE INDEX events_subject ON events (subject, seq)`,
    `CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'events are append-only (% refused)', TG_OP USING ERRCODE = 'insufficient_privilege';
    END $$`,
    `CREATE TRIGGER events_no_change BEFORE UPDATE OR DELETE ON events
      FOR EACH ROW EXECUTE FUNCTION events_append_only()`,
    `CREATE TABLE leases (
      name            text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_.:-]{0,199}$'),
      owner           text NOT NULL CHECK (length(owner) BETWEEN 1 AND 200),
      fence           bigint NOT NULL CHECK (fence > 0),
      expires_at      timestamptz(3) NOT NULL,
      acquired_at     timestamptz(3) NOT NULL DEFAULT now()
    )`,
  ],
};

const M009: Migration = {
  version: 9,
  name: 'ledger ingestion and deposits',
  statements: [
    `CREATE TABLE ingest_cursor (
      id              boolean PRIMARY KEY DEFAULT true CHECK (id),
      "offset"        bigint NOT NULL CHECK ("offset" >= 0),
      record_times    jsonb NOT NULL DEFAULT '{}',
      updated_at      timestamptz(3) NOT NULL DEFAULT now()
    )`,
    `CREATE TABLE ingest_parties (
      party           text PRIMARY KEY,
      from_offset     bigint NOT NULL CHECK (from_offset >= 0),
      added_at        timestamptz(3) NOT NULL DEFAULT now()
    )`,
    `CREATE TABLE ingested_updates (
      update_id       text PRIMARY KEY,
      "offset"        bigint NOT NULL,
      record_time     text NOT NULL,
      synchronizer_id text,
      ingested_at     timestamptz(3) NOT NULL DEFAULT now()
    )`,
    `CREATE INDEX ingested_updates_offset ON ingested_updates ("offset")`,
    `CREATE TABLE ledger_holdings (
      contract_id       text PRIMARY KEY,
      party             text NOT NULL,
      instrument_admin  text NOT NULL,
      instrument_id     text NOT NULL,
      amount            numeric(38, 10) NOT NULL,
      locked            boolean NOT NULL,
      created_offset    bigint NOT NULL,
      created_update_id text NOT NULL,
      archived_offset   bigint,
      archived_update_id text
    )`,
    `CREATE INDEX ledger_holdings_party ON ledger_holdings (party, created_offset)`,
    `CREATE TABLE ledger_movements (
      id                bigserial PRIMARY KEY,
      update_id         text NOT NULL,
      "offset"          bigint NOT NULL,
      record_time       text NOT NULL,
      node_id           integer NOT NULL,
      party             text NOT NULL,
      kind              text NOT NULL,
      instrument_admin  text NOT NULL,
      instrument_id     text NOT NULL,
      amount            numeric(38, 10) NOT NULL,
      locked            numeric(38, 10) NOT NULL,
      counterparty      text,
      memo              text,
      ours              boolean NOT NULL,
      withdrawal_id     uuid
    )`,
    `CREATE INDEX ledger_movements_party ON ledger_movements (party, "offset")`,
    `CREATE TABLE deposits (
      id                uuid PRIMARY KEY,
      party             text NOT NULL,
      sender            text NOT NULL,
      instrument_admin  text NOT NULL,
      instrument_id     text NOT NULL,
      amount            numeric(38, 10) NOT NULL CHECK (amount > 0),
      memo              text,
      memo_truncated    boolean NOT NULL DEFAULT false,
      account           text CHECK (account IS NULL OR length(account) BETWEEN 1 AND 200),
      attribution       text,
      kind              text NOT NULL CHECK (kind IN ('one_step', 'two_step')),
      state             text NOT NULL CHECK (state IN ('pending', 'credited', 'returned')),
      outcome           text,
      instruction_cid   text UNIQUE,
      execute_before    text,
      update_id         text NOT NULL,
      node_id           integer NOT NULL,
      "offset"          bigint NOT NULL,
      record_time       text NOT NULL,
      settled_update_id text,
      settled_offset    bigint,
      created_at        timestamptz(3) NOT NULL DEFAULT now(),
      updated_at        timestamptz(3) NOT NULL DEFAULT now(),
      UNIQUE (update_id, node_id, party, instrument_admin, instrument_id),
      CHECK ((kind = 'two_step') = (instruction_cid IS NOT NULL) OR state <> 'pending')
    )`,
    `CREATE INDEX deposits_page ON deposits (created_at, id)`,
    `CREATE INDEX deposits_party_page ON deposits (party, created_at, id)`,
    `CREATE INDEX deposits_unattributed ON deposits (created_at, id) WHERE account IS NULL`,
    `CREATE INDEX deposits_pending ON deposits (party) WHERE state = 'pending'`,
    // The lifecycle, a second time: a deposit's facts never change, its state moves only out of
    // pending, and an account, once set, stays.
    `CREATE FUNCTION deposits_guard() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.id IS DISTINCT FROM OLD.id OR NEW.party IS DISTINCT FROM OLD.party
         OR NEW.sender IS DISTINCT FROM OLD.sender OR NEW.amount IS DISTINCT FROM OLD.amount
         OR NEW.instrument_admin IS DISTINCT FROM OLD.instrument_admin
         OR NEW.instrument_id IS DISTINCT FROM OLD.instrument_id OR NEW.memo IS DISTINCT FROM OLD.memo
         OR NEW.kind IS DISTINCT FROM OLD.kind OR NEW.update_id IS DISTINCT FROM OLD.update_id
         OR NEW.node_id IS DISTINCT FROM OLD.node_id OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'deposit %: its facts are immutable', OLD.id USING ERRCODE = 'check_violation';
      END IF;
      IF OLD.account IS NOT NULL AND NEW.account IS DISTINCT FROM OLD.account THEN
        RAISE EXCEPTION 'deposit %: already attributed to an account', OLD.id USING ERRCODE = 'check_violation';
      END IF;
      IF NEW.state IS DISTINCT FROM OLD.state AND OLD.state <> 'pending' THEN
        RAISE EXCEPTION 'deposit %: % is final', OLD.id, OLD.state USING ERRCODE = 'check_violation';
      END IF;
      RETURN NEW;
    END $$`,
    `CREATE TRIGGER deposits_guard BEFORE UPDATE ON deposits FOR EACH ROW EXECUTE FUNCTION deposits_guard()`,
    // Which transactions this service made: the pipeline's journal records carry the command id.
    `CREATE INDEX audit_log_command ON audit_log ((details->>'commandId'))
      WHERE action IN ('flow.signed', 'flow.submitted')`,
  ],
};

const M010: Migration = {
  version: 10,
  name: 'webhook receivers and deliveries',
  statements: [
    // One row per configured receiver: how far its cursor has read the outbox.
    `CREATE TABLE webhook_receivers (
      name            text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
      after_seq       bigint NOT NULL DEFAULT 0 CHECK (after_seq >= 0),
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      updated_at      timestamptz(3) NOT NULL DEFAULT now()
    )`,
    // One row per (receiver, event it subscribes to): pending until delivered or dead.
    `CREATE TABLE webhook_deliveries (
      receiver        text NOT NULL REFERENCES webhook_receivers (name),
      event_seq       bigint NOT NULL REFERENCES events (seq),
      state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
      attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
      since           timestamptz(3) NOT NULL DEFAULT now(),
      next_attempt_at timestamptz(3) NOT NULL DEFAULT now(),
      last_attempt_at timestamptz(3),
      last_status     integer,
      last_error      text CHECK (length(last_error) <= 500),
      delivered_at    timestamptz(3),
      claimed_by      text,
      claimed_until   timestamptz(3),
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      updated_at      timestamptz(3) NOT NULL DEFAULT now(),
      PRIMARY KEY (receiver, event_seq)
    )`,
    `CREATE INDEX webhook_deliveries_due ON webhook_deliveries (receiver, next_attempt_at, event_seq)
      WHERE state = 'pending'`,
    `CREATE INDEX webhook_deliveries_state ON webhook_deliveries (state, receiver, event_seq)`,
  ],
};

const M011: Migration = {
  version: 11,
  name: 'exchange automation: offer decisions and sweeps',
  statements: [
    // One decision per incoming offer (auto-accept): what was decided and whether it was carried out.
    `CREATE TABLE offer_decisions (
      instruction_cid text PRIMARY KEY,
      deposit_id      uuid NOT NULL,
      party           text NOT NULL,
      action          text NOT NULL CHECK (action IN ('accept', 'reject', 'wait')),
      rule            text,
      state           text NOT NULL CHECK (state IN ('done', 'failed', 'waiting')),
      attempts        integer NOT NULL DEFAULT 0,
      error           text,
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      updated_at      timestamptz(3) NOT NULL DEFAULT now()
    )`,
    `CREATE INDEX offer_decisions_recent ON offer_decisions (updated_at DESC)`,
    // Treasury sweeps: surplus above a party's ceiling moved to another party in one step.
    `CREATE TABLE sweeps (
      id               uuid PRIMARY KEY,
      rule             text NOT NULL,
      from_party       text NOT NULL,
      to_party         text NOT NULL,
      amount           numeric(38, 10) NOT NULL CHECK (amount > 0),
      instrument_admin text NOT NULL,
      instrument_id    text NOT NULL,
      state            text NOT NULL CHECK (state IN ('planned', 'submitted', 'completed', 'failed', 'blocked')),
      command_id       text NOT NULL,
      update_id        text,
      error            text,
      created_at       timestamptz(3) NOT NULL DEFAULT now(),
      updated_at       timestamptz(3) NOT NULL DEFAULT now()
    )`,
    `CREATE UNIQUE INDEX sweeps_one_open ON sweeps (from_party) WHERE state IN ('planned', 'submitted')`,
    `CREATE INDEX sweeps_recent ON sweeps (created_at DESC, id)`,
  ],
};

const M013: Migration = {
  version: 13,
  name: "names of the signer's parties (name service entries and their renewals)",
  statements: [
    // One row per registration: from the request to the entry, its renewals and its end.
    // Times are µs since the epoch (the ledger's precision); amounts are CC or USD decimals.
    `CREATE TABLE ans_names (
      id              uuid PRIMARY KEY,
      party           text NOT NULL,
      name            text NOT NULL,
      url             text NOT NULL DEFAULT '',
      description     text NOT NULL DEFAULT '',
      state           text NOT NULL CHECK (state IN
                        ('requesting', 'requested', 'paid', 'active', 'renewing', 'lapsed', 'expired', 'rejected', 'failed')),
      auto_renew      boolean NOT NULL DEFAULT true,
      dso             text NOT NULL,
      entry_fee_usd   numeric(38, 10) NOT NULL CHECK (entry_fee_usd > 0),
      lifetime_us     bigint NOT NULL CHECK (lifetime_us > 0),
      renewal_us      bigint NOT NULL CHECK (renewal_us > 0),
      description_prefix text NOT NULL,
      request_cid     text,
      entry_cid       text,
      payment_cid     text,
      expires_us      bigint,
      next_due_us     bigint,
      renewals        integer NOT NULL DEFAULT 0,
      paid_cc         numeric(38, 10) NOT NULL DEFAULT 0,
      outstanding_cc  numeric(38, 10),
      repaid          integer NOT NULL DEFAULT 0,
      last_payment_cc numeric(38, 10),
      last_price      numeric(38, 10),
      export_id       text,
      approval_id     text,
      pending_command text,
      notified        text NOT NULL DEFAULT '',
      error           text,
      retry_at_us     bigint,
      created_at      timestamptz(3) NOT NULL DEFAULT now(),
      updated_at      timestamptz(3) NOT NULL DEFAULT now()
    )`,
    // A name is registered by at most one row at a time; an ended one may be registered again.
    `CREATE UNIQUE INDEX ans_names_live ON ans_names (name) WHERE state NOT IN ('expired', 'rejected', 'failed')`,
    `CREATE UNIQUE INDEX ans_names_request ON ans_names (request_cid)
      WHERE request_cid IS NOT NULL AND state NOT IN ('expired', 'rejected', 'failed')`,
    `CREATE INDEX ans_names_party ON ans_names (party, created_at)`,
  ],
};

export const MIGRATIONS: readonly Migration[] = [
  M001,
  M002,
  M003,
  M004,
  M005,
  M006,
  M007,
  M008,
  M009,
  M010,
  M011,
  M012,
  M013,
];

/** Key of the transaction-scoped advisory lock the runner holds ("cs-migr" in ASCII). */
const LOCK_KEY = '27992661640701810';

export function migrationChecksum(m: Migration): string {
  return createHash('sha256').update(m.statements.join('\n;\n'), 'utf8').digest('hex');
}

export interface MigrateResult {
  /** Versions applied by this call (empty when the schema was current). */
  applied: number[];
  /** Schema version after the call. */
  version: number;
}

/** Applies the pending migrations (all of them in one transaction, under the advisory lock). */
export async function migrate(db: Db, migrations: readonly Migration[] = MIGRATIONS): Promise<MigrateResult> {
  return db.transaction(async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(${LOCK_KEY})`);
    await tx.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version    integer PRIMARY KEY,
      name       text NOT NULL,
      checksum   text NOT NULL,
      applied_at timestamptz(3) NOT NULL DEFAULT now()
    )`);
    const { rows } = await tx.query<{ version: number; checksum: string }>(
      'SELECT version, checksum FROM schema_migrations ORDER BY version',
    );
    const known = new Map(migrations.map((m) => [m.version, m]));
    const latest = migrations.reduce((n, m) => Math.max(n, m.version), 0);
    for (const r of rows) {
      const m = known.get(r.version);
      if (!m)
        throw new StoreError(
          'schema',
          `the database has schema version ${r.version}, newer than this canton-signer knows (${latest}); upgrade canton-signer`,
        );
      if (migrationChecksum(m) !== r.checksum)
        throw new StoreError(
          'schema',
          `migration ${r.version} (${m.name}) applied to this database differs from this build's (checksum mismatch)`,
        );
    }
    const done = new Set(rows.map((r) => r.version));
    const applied: number[] = [];
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(m.version)) continue;
      for (const sql of m.statements) await tx.query(sql);
      await tx.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [
        m.version,
        m.name,
        migrationChecksum(m),
      ]);
      applied.push(m.version);
    }
    return { applied, version: latest };
  });
}

/** The schema version recorded in the database (0 when never migrated). */
export async function schemaVersion(db: Db): Promise<number> {
  const t = await db.query<{ t: string | null }>(`SELECT to_regclass('schema_migrations')::text AS t`);
  if (!t.rows[0]?.t) return 0;
  const r = await db.query<{ v: number | null }>('SELECT max(version) AS v FROM schema_migrations');
  return r.rows[0]?.v ?? 0;
}
