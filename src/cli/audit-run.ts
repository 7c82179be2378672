/**
 * What `canton-signer audit verify` does (its options are in audit.ts): ask a
 * running service, or open the database itself read-only, and walk the audit
 * log's hash chain. Loaded only when the command runs.
 */
import { existsSync } from 'node:fs';
import { ConfigError, databaseUrlProblem, loadDatabaseConfig } from '../server/config.js';
import { type AuditProblem, type AuditVerification, verifyAudit } from '../store/audit.js';
import { type Db, holdsPglite, openPglite, openPostgres } from '../store/db.js';
import { FolderInUseError } from '../store/folder-lock.js';
import { schemaVersion } from '../store/migrations.js';
import { clientFrom, DEFAULT_URL, TOKEN_ENV, URL_ENV } from './air-gap.js';
import { CliExit, EXIT_IN_USE } from './options.js';

export interface AuditOptions {
  databaseUrl?: string;
  dataDir?: string;
  config?: string;
  json?: boolean;
  url?: string;
  token?: string;
  timeout?: string;
}

/** What GET /v1/audit/verify answers. */
interface ServiceVerification {
  ok: boolean;
  rows: number;
  head?: { seq: number; hash: string };
  problem?: { seq: number; kind: AuditProblem; message: string };
}

async function openForAudit(opts: AuditOptions): Promise<Db> {
  let url = opts.databaseUrl;
  let dir = opts.dataDir;
  if (url !== undefined) {
    const problem = databaseUrlProblem(url);
    if (problem) throw new CliExit(2, `--database-url: ${problem}`);
  }
  if (url === undefined && dir === undefined) {
    try {
      const db = await loadDatabaseConfig(opts.config !== undefined ? { file: opts.config } : {});
      url = db.url;
      dir = db.dataDir;
    } catch (e) {
      if (e instanceof ConfigError) throw new CliExit(2, e.message);
      throw e;
    }
  }
  if (url) {
    try {
      return await openPostgres(url, { max: 2 });
    } catch (e) {
      throw new CliExit(1, e instanceof Error ? e.message : String(e));
    }
  }
  const where = dir ?? './data';
  // Checked before the engine sees the folder: opening an empty one would create a database in it.
  if (!existsSync(where))
    throw new CliExit(
      2,
      `no database at ${where}: no such folder (use --data-dir, --database-url or --config${dir === undefined ? "; development mode's, npm start's, is --data-dir ./dev/data" : ''})`,
    );
  if (!holdsPglite(where))
    throw new CliExit(
      2,
      `${where} holds no canton-signer database (use --data-dir, --database-url or --config)`,
    );
  try {
    return await openPglite(where, { maintenance: false });
  } catch (e) {
    if (e instanceof FolderInUseError)
      throw new CliExit(
        EXIT_IN_USE,
        `${e.message}. The embedded database opens in one process at a time: verify through the running service instead, with an auditor or admin token in $${TOKEN_ENV}: canton-signer audit verify --url ${e.holder?.url ?? (process.env[URL_ENV]?.trim() || DEFAULT_URL)}`,
      );
    throw e;
  }
}

async function verifyLocally(opts: AuditOptions): Promise<AuditVerification> {
  const db = await openForAudit(opts);
  try {
    if ((await schemaVersion(db)) === 0)
      throw new CliExit(2, `${db.location} holds no canton-signer database`);
    return await verifyAudit(db);
  } finally {
    await db.close();
  }
}

async function verifyThroughService(opts: AuditOptions): Promise<AuditVerification> {
  if (opts.databaseUrl !== undefined || opts.dataDir !== undefined || opts.config !== undefined)
    throw new CliExit(
      2,
      '--url asks the service: give it alone, without --database-url, --data-dir or --config',
    );
  if (!(opts.token ?? process.env[TOKEN_ENV]))
    throw new CliExit(
      2,
      `--url asks the service, which needs a bearer token of an auditor or admin: set $${TOKEN_ENV} (or give --token)`,
    );
  const client = clientFrom(opts);
  const v = await client.call<ServiceVerification>('GET', '/v1/audit/verify');
  if (v.ok && v.head) return { ok: true, rows: v.rows, head: v.head };
  if (!v.ok && v.problem)
    return {
      ok: false,
      rows: v.rows,
      seq: v.problem.seq,
      problem: v.problem.kind,
      message: v.problem.message,
    };
  throw new CliExit(1, `the service at ${client.shown} answered GET /v1/audit/verify without a verification`);
}

/** Runs `audit verify`: prints the verification, and exits 1 when the chain is broken. */
export async function auditVerify(opts: AuditOptions): Promise<void> {
  const v = opts.url !== undefined ? await verifyThroughService(opts) : await verifyLocally(opts);
  if (opts.json) process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
  if (!v.ok) throw new CliExit(1, `audit log BROKEN at seq ${v.seq} (${v.problem}): ${v.message}`);
  if (!opts.json)
    process.stdout.write(`audit log intact: ${v.rows} rows; head seq ${v.head.seq} hash ${v.head.hash}\n`);
}
