/**
 * `canton-signer audit verify`: walks the audit log's hash chain and reports
 * the first row edited, removed or reordered. Exit 0 intact, 1 broken (the
 * message names the row), 2 when there is nothing to check. The database:
 * --database-url, else the folder --data-dir, else the service's own
 * database settings (CANTON_SIGNER_DATABASE_URL, DATABASE_URL,
 * CANTON_SIGNER_DATA_DIR, then the configuration file of --config or
 * CANTON_SIGNER_CONFIG, else ./data), as `serve` finds them. Never migrates
 * nor maintains: an audit check does not change the database it checks.
 */
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { ConfigError, loadDatabaseConfig } from '../server/config.js';
import { verifyAudit } from '../store/audit.js';
import { type Db, openPglite, openPostgres } from '../store/db.js';
import { schemaVersion } from '../store/migrations.js';
import { CliExit } from './options.js';

interface AuditOptions {
  databaseUrl?: string;
  dataDir?: string;
  config?: string;
  json?: boolean;
}

async function openForAudit(opts: AuditOptions): Promise<Db> {
  let url = opts.databaseUrl;
  let dir = opts.dataDir;
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
  if (!existsSync(where))
    throw new CliExit(2, `no database at ${where} (use --data-dir, --database-url or --config)`);
  return openPglite(where, { maintenance: false });
}

export function registerAudit(program: Command): void {
  const audit = program.command('audit').description('The tamper-evident audit log');
  audit
    .command('verify')
    .description('Verify the audit log hash chain; exit 0 intact, 1 broken')
    .option('--database-url <url>', 'PostgreSQL URL (default: the service configuration)')
    .option('--data-dir <dir>', 'embedded database folder (default: the service configuration, else ./data)')
    .option(
      '--config <file>',
      'the service configuration file for the database settings (default $CANTON_SIGNER_CONFIG)',
    )
    .option('--json', 'print JSON')
    .action(async (opts: AuditOptions) => {
      const db = await openForAudit(opts);
      try {
        if ((await schemaVersion(db)) === 0)
          throw new CliExit(2, `${db.location} holds no canton-signer database`);
        const v = await verifyAudit(db);
        if (opts.json) process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
        if (!v.ok) throw new CliExit(1, `audit log BROKEN at seq ${v.seq} (${v.problem}): ${v.message}`);
        if (!opts.json)
          process.stdout.write(
            `audit log intact: ${v.rows} rows; head seq ${v.head.seq} hash ${v.head.hash}\n`,
          );
      } finally {
        await db.close();
      }
    });
}
