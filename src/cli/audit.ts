/**
 * `canton-signer audit verify`: walks the audit log's hash chain and reports
 * the first row edited, removed or reordered. Exit 0 intact, 1 broken (the
 * message names the row; a deleted audit table is a broken log too), 2 when
 * there is nothing to check or a bad database setting, 75 when the embedded
 * database is held by a running service.
 *
 * Where: `--url` asks a running service (GET /v1/audit/verify with an
 * auditor or admin token); else the database itself: --database-url, else
 * the folder --data-dir, else the service's own database settings
 * (CANTON_SIGNER_DATABASE_URL, DATABASE_URL, CANTON_SIGNER_DATA_DIR, then the
 * configuration file of --config or CANTON_SIGNER_CONFIG, else ./data), as
 * `serve` finds them. Never creates, migrates nor maintains a database: a
 * folder that holds none is left exactly as it was found.
 */
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { ConfigError, databaseUrlProblem, loadDatabaseConfig } from '../server/config.js';
import { type AuditProblem, type AuditVerification, verifyAudit } from '../store/audit.js';
import { type Db, holdsPglite, openPglite, openPostgres } from '../store/db.js';
import { FolderInUseError } from '../store/folder-lock.js';
import { schemaVersion } from '../store/migrations.js';
import { clientFrom, DEFAULT_URL, TOKEN_ENV, URL_ENV } from './air-gap.js';
import { CliExit, EXIT_IN_USE } from './options.js';

interface AuditOptions {
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

export function registerAudit(program: Command): void {
  const audit = program.command('audit').description('The tamper-evident audit log');
  const verify = audit
    .command('verify')
    .description('Verify the audit log hash chain; exit 0 intact, 1 broken')
    .option('--database-url <url>', 'PostgreSQL URL (default: the service configuration)')
    .option('--data-dir <dir>', 'embedded database folder (default: the service configuration, else ./data)')
    .option(
      '--config <file>',
      'the service configuration file for the database settings (default $CANTON_SIGNER_CONFIG)',
    )
    .option('--json', 'print JSON')
    .option(
      '--url <url>',
      `ask this running service (GET /v1/audit/verify) instead of opening its database; the token (auditor or admin) from $${TOKEN_ENV}`,
    )
    .option('--token <token>', `bearer token for --url (default $${TOKEN_ENV}; prefer the variable)`)
    .option('--timeout <seconds>', 'per request to --url (default 30)');
  verify.action(async (opts: AuditOptions) => {
    const v = opts.url !== undefined ? await verifyThroughService(opts) : await verifyLocally(opts);
    if (opts.json) process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
    if (!v.ok) throw new CliExit(1, `audit log BROKEN at seq ${v.seq} (${v.problem}): ${v.message}`);
    if (!opts.json)
      process.stdout.write(`audit log intact: ${v.rows} rows; head seq ${v.head.seq} hash ${v.head.hash}\n`);
  });
}
