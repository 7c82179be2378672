/**
 * `canton-signer ingest status|rewind|resume-after-upgrade`: an operator's
 * recovery controls over the ledger ingestion, as REST clients of a running
 * service (GET /v1/ingestion, POST /v1/ingestion/rewind,
 * POST /v1/ingestion/resume-after-upgrade). Through the service, not the
 * database: a rewind to a record time reads the participant with the
 * service's Ledger API user and its party book, the embedded database opens
 * in one process at a time, and the audit row names the token's caller.
 *
 * These commands stop nothing: run them with ingestion paused (or the only
 * ingesting instance fenced out with --force). A rewind or resume refuses
 * while another instance holds the ingestion lease; --force fences it out
 * (its next write fails and it stops; it reads the moved cursor when it
 * takes the lease again).
 *
 * The URL comes from --url or $CANTON_SIGNER_URL, the bearer token (admin for
 * the controls; operator, auditor or admin for status) from
 * $CANTON_SIGNER_TOKEN only. Exit codes: 0 done, 1 refused or failed, 2 usage.
 */
import { type Command, Option } from 'commander';
import { UsageError } from './input.js';
import { CliExit } from './options.js';
import { print, printJson } from './output.js';
import { DEFAULT_TIMEOUT_S, DEFAULT_URL, TOKEN_ENV, URL_ENV } from './service-env.js';

interface ServiceOpts {
  url?: string;
  timeout?: string;
  json?: boolean;
}

interface StatusView {
  cursor?: { offset: number; recordTimes: Record<string, string> };
  lastUpdate?: { updateId: string; offset: number; recordTime: string; synchronizerId?: string };
  lease?: { owner: string; fence: number; expiresAt: string };
  ledgerEnd?: number;
  lag?: number;
  ledgerError?: string;
}

interface MoveView {
  from?: number;
  to: number;
  fencedOut?: string;
  resume?: { offset: number; recordTime?: string; scanned: number };
}

async function service(opts: ServiceOpts, who: string) {
  if (!process.env[TOKEN_ENV]?.trim())
    throw new CliExit(
      2,
      `no bearer token: set $${TOKEN_ENV} to ${who} token (a token is never taken from the command line)`,
    );
  const { clientFrom } = await import('./air-gap.js');
  return clientFrom({
    ...(opts.url !== undefined ? { url: opts.url } : {}),
    ...(opts.timeout !== undefined ? { timeout: opts.timeout } : {}),
  });
}

function serviceOptions(c: Command): Command {
  return c
    .addOption(
      new Option('--url <url>', `the canton-signer service (default $${URL_ENV}, else ${DEFAULT_URL})`),
    )
    .addOption(
      new Option(
        '--timeout <seconds>',
        `per request (default ${DEFAULT_TIMEOUT_S}; a rewind to a record time walks the participant's history: give it time)`,
      ),
    )
    .option('--json', 'print the answer as JSON');
}

function statusText(s: StatusView): string {
  const lines: string[] = [];
  lines.push(s.cursor ? `cursor: offset ${s.cursor.offset}` : 'cursor: none (ingestion has not run)');
  for (const [sync, t] of Object.entries(s.cursor?.recordTimes ?? {}))
    lines.push(`  record time ${t} on ${sync}`);
  if (s.lastUpdate)
    lines.push(
      `last update: ${s.lastUpdate.updateId} at offset ${s.lastUpdate.offset}, record time ${s.lastUpdate.recordTime}`,
    );
  lines.push(
    s.lease
      ? `lease: held by ${s.lease.owner} until ${s.lease.expiresAt} (fence ${s.lease.fence})`
      : 'lease: free',
  );
  if (s.ledgerEnd !== undefined)
    lines.push(`ledger end: ${s.ledgerEnd} (ingestion ${s.lag ?? 0} offsets behind)`);
  if (s.ledgerError) lines.push(`ledger end: unknown (${s.ledgerError})`);
  return lines.join('\n');
}

function moveText(m: MoveView, what: string): string {
  const from = m.from === undefined ? 'no cursor' : `offset ${m.from}`;
  const lines = [`${what}: cursor moved from ${from} to offset ${m.to}`];
  if (m.resume)
    lines.push(
      m.resume.recordTime
        ? `  the largest offset before the record time: ${m.resume.offset} (record time ${m.resume.recordTime}; ${m.resume.scanned} updates read)`
        : `  no update before the record time: ingestion reads from the ledger's start (${m.resume.scanned} updates read)`,
    );
  if (m.fencedOut) lines.push(`  fenced out the lease holder ${m.fencedOut}`);
  lines.push('  start (or resume) ingestion: updates it already has are recognised by update id and skipped');
  return lines.join('\n');
}

export function registerIngest(program: Command): void {
  const ingest = program
    .command('ingest')
    .description('Ledger ingestion: status, and recovery after a participant restore or a major upgrade');

  serviceOptions(
    ingest.command('status').description('Cursor, record times, last update, lease holder, lag'),
  ).action(async (opts: ServiceOpts) => {
    const client = await service(opts, 'an operator, auditor or admin');
    const s = await client.call<StatusView>('GET', '/v1/ingestion');
    if (opts.json) return printJson(s);
    print(statusText(s));
  });

  serviceOptions(
    ingest
      .command('rewind')
      .description(
        'Move the cursor back: to an offset, or to the offset before a record time (after a participant restore). Pause ingestion first',
      )
      .option(
        '--record-time <iso>',
        'tRecovery: the record time of the last transaction ingested before the restore',
      )
      .option('--synchronizer <id>', 'the synchronizer that record time is on (default: any)')
      .option('--offset <n>', 'an offset of the participant as it is now')
      .option('--force', 'go ahead although another instance holds the ingestion lease (fences it out)'),
  ).action(
    async (
      opts: ServiceOpts & { recordTime?: string; synchronizer?: string; offset?: string; force?: boolean },
    ) => {
      if ((opts.recordTime === undefined) === (opts.offset === undefined))
        throw new UsageError('give either --record-time <iso> or --offset <n>');
      if (opts.offset !== undefined && !/^\d+$/.test(opts.offset))
        throw new UsageError(`--offset ${opts.offset}: give a non-negative whole number`);
      if (opts.synchronizer !== undefined && opts.recordTime === undefined)
        throw new UsageError('--synchronizer goes with --record-time');
      const body =
        opts.offset !== undefined
          ? { offset: Number(opts.offset), force: opts.force === true }
          : {
              recordTime: opts.recordTime,
              ...(opts.synchronizer ? { synchronizerId: opts.synchronizer } : {}),
              force: opts.force === true,
            };
      const client = await service(opts, 'an admin');
      const m = await client.call<MoveView>('POST', '/v1/ingestion/rewind', { body: JSON.stringify(body) });
      if (opts.json) return printJson(m);
      print(moveText(m, 'rewound'));
    },
  );

  serviceOptions(
    ingest
      .command('resume-after-upgrade')
      .description(
        'After a major upgrade: read the new ledger from its start; its imported contracts are recognised, nothing is credited. Pause ingestion first',
      )
      .option('--force', 'also when the lease is held, or the ledger does not start with imports'),
  ).action(async (opts: ServiceOpts & { force?: boolean }) => {
    const client = await service(opts, 'an admin');
    const m = await client.call<MoveView>('POST', '/v1/ingestion/resume-after-upgrade', {
      body: JSON.stringify({ force: opts.force === true }),
    });
    if (opts.json) return printJson(m);
    print(moveText(m, 'resumed after the upgrade'));
  });
}
