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
 * folder that holds none is left exactly as it was found. This module defines
 * the command; what it does is loaded from audit-run.ts when it runs.
 */
import type { Command } from 'commander';
import type { AuditOptions } from './audit-run.js';
import { TOKEN_ENV } from './service-env.js';

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
  verify.action(async (opts: AuditOptions) => (await import('./audit-run.js')).auditVerify(opts));
}
