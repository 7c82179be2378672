/**
 * `canton-signer audit verify`: walks the audit log's hash chain and reports
 * the first row edited, removed or reordered. Exit 0 intact, 1 broken (the
 * message names the row). The database: --database-url (or DATABASE_URL),
 * else the PGlite folder --data-dir (default ./data). Never migrates: an
 * audit check does not change the database it checks.
 */
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { verifyAudit } from '../store/audit.js';
import { type Db, openPglite, openPostgres } from '../store/db.js';
import { schemaVersion } from '../store/migrations.js';
import { CliExit } from './options.js';

async function openForAudit(opts: { databaseUrl?: string; dataDir?: string }): Promise<Db> {
  const url = opts.databaseUrl ?? (process.env.DATABASE_URL || undefined);
  if (url) {
    try {
      return await openPostgres(url, { max: 2 });
    } catch (e) {
      throw new CliExit(1, e instanceof Error ? e.message : String(e));
    }
  }
  const dir = opts.dataDir ?? './data';
  if (!existsSync(dir)) throw new CliExit(2, `no database at ${dir} (use --data-dir or --database-url)`);
  return openPglite(dir);
}

export function registerAudit(program: Command): void {
  const audit = program.command('audit').description('The tamper-evident audit log');
  audit
    .command('verify')
    .description('Verify the audit log hash chain; exit 0 intact, 1 broken')
    .option('--database-url <url>', 'PostgreSQL URL (default $DATABASE_URL)')
    .option('--data-dir <dir>', 'embedded database folder when no URL is given (default ./data)')
    .option('--json', 'print JSON')
    .action(async (opts: { databaseUrl?: string; dataDir?: string; json?: boolean }) => {
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
