/**
 * The online half of air-gapped signing on the command line:
 * `export-key` (`--create`: the admin's one-time setup), `exports`, `export`
 * and `import`, as REST clients of a
 * running `canton-signer serve` (never the database). `export` writes the
 * sealed request of a withdrawal (a file, stdout, QR frame PNGs) for the
 * offline machine; `import` parses an offline signer's response locally,
 * naming the bad field before anything is sent, then hands it to the service.
 *
 * The service URL comes from --url or $CANTON_SIGNER_URL, the bearer token
 * from $CANTON_SIGNER_TOKEN (or --token, which other users can read in the
 * process list). The token never appears in any output or error. Exit codes:
 * 0 done, 1 the service refused or could not be reached, 2 usage or a
 * response file that is not a response.
 */
import { createPublicKey } from 'node:crypto';
import { type Command, Option } from 'commander';
import { fingerprint } from '../hashing/canton-hash.js';
import { AirGapError, parseRequestEnvelope, parseResponse } from '../offline/format.js';
import { readPayloadText, UsageError } from './input.js';
import {
  checkPayloadTargets,
  type QrOutputOpts,
  qrOutputOptions,
  writeNew,
  writePayload,
} from './offline.js';
import { CliExit } from './options.js';
import { DEFAULT_TIMEOUT_S, DEFAULT_URL, TOKEN_ENV, URL_ENV } from './service-env.js';
import { networkErrorText } from './system-errors.js';

export { DEFAULT_TIMEOUT_S, DEFAULT_URL, TOKEN_ENV, URL_ENV };

/** The frame files src/offline/qr.ts writes. */

interface ClientOpts {
  url?: string;
  token?: string;
  timeout?: string;
}

/** One service, one token: JSON over fetch, with a timeout; errors never carry the token. */
export class ServiceClient {
  readonly base: URL;
  /** The base URL as it may be shown (no credentials, no query). */
  readonly shown: string;
  private readonly token: string | undefined;
  private readonly timeoutMs: number;

  constructor(opts: { url: string; token?: string | undefined; timeoutMs?: number }) {
    let u: URL;
    try {
      u = new URL(opts.url);
    } catch {
      throw new UsageError(`--url: not a URL such as ${DEFAULT_URL}`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new UsageError(`--url: must be an http:// or https:// URL, not ${u.protocol}`);
    const hadCredentials = u.username !== '' || u.password !== '';
    u.username = '';
    u.password = '';
    u.search = '';
    u.hash = '';
    this.base = u;
    this.shown = u.toString().replace(/\/+$/, '');
    if (hadCredentials)
      throw new UsageError(
        `--url ${this.shown}: credentials in the URL are not used; give the token in $${TOKEN_ENV}`,
      );
    const t = opts.token?.trim();
    this.token = t ? t : undefined;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_S * 1000;
  }

  /** Removes the token from any text that is about to be shown. */
  redact(text: string): string {
    return this.token ? text.split(this.token).join('[redacted]') : text;
  }

  private endpoint(path: string, query?: Record<string, string | undefined>): URL {
    const u = new URL(this.base.toString());
    u.pathname = `${u.pathname.replace(/\/+$/, '')}${path}`;
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, v);
    return u;
  }

  /** The JSON body of a 2xx answer; anything else ends the command (exit 1) with the service's code and message. */
  async call<T>(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    path: string,
    opts: { query?: Record<string, string | undefined>; body?: string } = {},
  ): Promise<T> {
    const url = this.endpoint(path, opts.query);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers,
        ...(opts.body !== undefined ? { body: opts.body } : {}),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      const err = e as Error & { cause?: { code?: string } };
      const timedOut = err.name === 'TimeoutError' || err.name === 'AbortError';
      throw new CliExit(
        1,
        this.redact(
          networkErrorText(
            'cannot reach the service',
            this.shown,
            {
              code: timedOut ? 'TIMEOUT' : (err.cause?.code ?? 'ECONNRESET'),
              request: `${method} ${url.pathname}`,
              timeoutMs: this.timeoutMs,
            },
            'start it (`canton-signer serve`, or `npm start` in development), or check --url (CANTON_SIGNER_URL)',
          ),
        ),
      );
    }
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      throw new CliExit(
        1,
        this.redact(`the service at ${this.shown} broke off its answer: ${(e as Error).message}`),
      );
    }
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (res.ok) {
      if (json === undefined || typeof json !== 'object' || json === null)
        throw new CliExit(
          1,
          `the service at ${this.shown} answered ${method} ${url.pathname} with ${res.status} but no JSON document: is --url a canton-signer service?`,
        );
      return json as T;
    }
    const b = (json ?? {}) as { code?: unknown; message?: unknown; field?: unknown };
    if (typeof b.code === 'string' && typeof b.message === 'string') {
      const field = typeof b.field === 'string' ? ` (field ${b.field})` : '';
      const head = res.status >= 500 ? `service error ${res.status} (${b.code})` : `refused (${b.code})`;
      throw new CliExit(1, this.redact(`${head}: ${b.message}${field}`));
    }
    throw new CliExit(
      1,
      `the service at ${this.shown} answered ${method} ${url.pathname} with ${res.status} ${res.statusText} and no error document: is --url a canton-signer service?`,
    );
  }
}

function parseTimeout(s: string | undefined): number {
  if (s === undefined) return DEFAULT_TIMEOUT_S * 1000;
  const n = Number(s);
  if (!/^\d+(\.\d+)?$/.test(s.trim()) || !(n > 0) || n > 3600)
    throw new UsageError(`--timeout: not a number of seconds between 0 and 3600: ${s}`);
  return Math.round(n * 1000);
}

export function clientFrom(opts: ClientOpts, env: NodeJS.ProcessEnv = process.env): ServiceClient {
  return new ServiceClient({
    url: opts.url ?? (env[URL_ENV]?.trim() || DEFAULT_URL),
    token: opts.token ?? env[TOKEN_ENV],
    timeoutMs: parseTimeout(opts.timeout),
  });
}

function connectionOptions(c: Command): Command {
  return c
    .addOption(
      new Option('--url <url>', `the canton-signer service (default $${URL_ENV}, else ${DEFAULT_URL})`),
    )
    .addOption(
      new Option(
        '--token <token>',
        `bearer token (default $${TOKEN_ENV}; prefer the variable: a token on the command line is visible in process lists)`,
      ),
    )
    .addOption(new Option('--timeout <seconds>', `per request (default ${DEFAULT_TIMEOUT_S})`));
}

interface ExportView {
  id: string;
  kind: string;
  status: string;
  party: string;
  keyFingerprint: string;
  hashes: string[];
  withdrawalId?: string;
  subject: string;
  windowLatest: string;
  digest: string;
  nonce: string;
  createdAt: string;
  importedAt?: string;
}

interface ExportKeyView {
  label: string;
  scheme: string;
  fingerprint: string;
  publicKey: string;
  pem: string;
}

interface ImportResult {
  export: ExportView;
  withdrawal?: { id: string; state: string; updateId?: string; lastError?: string };
  executed?: { updateId: string; commandId: string; completionOffset: number };
  onboarded?: { partyId: string; status: string };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function checkId(what: string, id: string): string {
  if (!UUID.test(id)) throw new UsageError(`${what}: not an id (a UUID): ${id}`);
  return id;
}

/** The export key as served, its fingerprint recomputed from the key itself. */
function checkExportKey(k: ExportKeyView, shown: string): ExportKeyView {
  let spki: Buffer;
  try {
    spki = Buffer.from(k.publicKey, 'base64');
    createPublicKey({ key: spki, format: 'der', type: 'spki' });
    const fromPem = createPublicKey({ key: k.pem, format: 'pem' }).export({ type: 'spki', format: 'der' });
    if (!fromPem.equals(spki)) throw new Error('pem differs');
  } catch {
    throw new CliExit(1, `the service at ${shown} served an export key that is not a readable public key`);
  }
  if (fingerprint(new Uint8Array(spki)) !== k.fingerprint)
    throw new CliExit(
      1,
      `the service at ${shown} states export key fingerprint ${k.fingerprint}, but the key's own is ${fingerprint(new Uint8Array(spki))}`,
    );
  return k;
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** The response text: a file, '-' (stdin), or a folder of QR frame PNGs (RESPONSE or --from-qr). */
async function readResponseText(response: string | undefined, fromQr: string | undefined): Promise<string> {
  try {
    return await readPayloadText('RESPONSE', response, fromQr);
  } catch (e) {
    if (e instanceof Error && e.name === 'QrTransportError')
      throw new UsageError(
        `the QR frames in ${fromQr ?? response} do not give a response (${(e as Error & { code: string }).code}): ${e.message}`,
      );
    throw e;
  }
}

export function registerAirGap(program: Command): void {
  connectionOptions(
    program
      .command('export-key')
      .description(
        "Fetch the service's export public key (PEM): the offline machine trusts it with `offline sign --trust FILE`",
      )
      .option('--out <file>', 'write the PEM here (default: stdout); an existing file is not overwritten')
      .option('--force', 'overwrite an existing --out file')
      .option(
        '--create',
        'create the export key first if the service has none (once, at setup; an admin token)',
      ),
  ).action(async (opts: ClientOpts & { out?: string; force?: boolean; create?: boolean }) => {
    checkPayloadTargets({ ...(opts.out !== undefined ? { out: opts.out } : {}), force: opts.force === true });
    const client = clientFrom(opts);
    const k = checkExportKey(
      await client.call<ExportKeyView>(opts.create === true ? 'POST' : 'GET', '/v1/air-gap/export-key'),
      client.shown,
    );
    if (opts.out !== undefined) await writeNew(opts.out, k.pem, opts.force === true);
    else process.stdout.write(k.pem);
    process.stderr.write(
      `export key ${k.label} (${k.scheme}) fingerprint ${k.fingerprint}${opts.out !== undefined ? `; PEM written to ${opts.out}` : ''}\n`,
    );
  });

  connectionOptions(
    program
      .command('exports')
      .description('List the exported signing requests, newest first')
      .addOption(
        new Option('--status <status>', 'only these').choices([
          'open',
          'imported',
          'stale',
          'cancelled',
          'done',
        ]),
      )
      .option('--party <party>', 'only this party')
      .option('--withdrawal <id>', 'only this withdrawal')
      .option('--limit <n>', 'at most this many (1-500)', '100')
      .option('--json', 'print {items: [...]} as JSON'),
  ).action(
    async (
      opts: ClientOpts & {
        status?: string;
        party?: string;
        withdrawal?: string;
        limit: string;
        json?: boolean;
      },
    ) => {
      if (!/^\d+$/.test(opts.limit) || Number(opts.limit) < 1 || Number(opts.limit) > 500)
        throw new UsageError(`--limit: not a number from 1 to 500: ${opts.limit}`);
      if (opts.withdrawal !== undefined) checkId('--withdrawal', opts.withdrawal);
      const client = clientFrom(opts);
      const r = await client.call<{ items: ExportView[] }>('GET', '/v1/air-gap/exports', {
        query: { status: opts.status, party: opts.party, withdrawalId: opts.withdrawal, limit: opts.limit },
      });
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
        return;
      }
      if (r.items.length === 0) {
        process.stdout.write('no exports\n');
        return;
      }
      const rows = [
        ['ID', 'STATUS', 'PARTY', 'WITHDRAWAL', 'WINDOW LATEST'],
        ...r.items.map((x) => [x.id, x.status, x.party, x.withdrawalId ?? '-', x.windowLatest]),
      ];
      process.stdout.write(`${table(rows)}\n`);
    },
  );

  const exportCmd = connectionOptions(
    program
      .command('export')
      .description(
        'Write the sealed signing request of a withdrawal awaiting an offline signature (for `offline sign`)',
      )
      .option('--withdrawal <id>', 'the withdrawal (in awaiting_signature)')
      .option('--export <id>', 'an export by its id (any status)')
      .option('--out <file>', 'write the request here (default: stdout); an existing file is not overwritten')
      .option('--force', 'overwrite an existing --out file'),
  );
  qrOutputOptions(exportCmd, 'request').action(
    async (
      opts: ClientOpts &
        QrOutputOpts & {
          withdrawal?: string;
          export?: string;
          out?: string;
          force?: boolean;
          qrInterval?: number;
        },
    ) => {
      if ((opts.withdrawal === undefined) === (opts.export === undefined))
        throw new UsageError('give either --withdrawal ID or --export ID');
      checkPayloadTargets(opts);
      const client = clientFrom(opts);
      const r =
        opts.withdrawal !== undefined
          ? await client.call<{ export: ExportView; envelope: unknown }>('POST', '/v1/air-gap/exports', {
              body: JSON.stringify({ withdrawalId: checkId('--withdrawal', opts.withdrawal) }),
            })
          : await client.call<{ export: ExportView; envelope: unknown }>(
              'GET',
              `/v1/air-gap/exports/${checkId('--export', opts.export!)}`,
            );
      try {
        parseRequestEnvelope(r.envelope);
      } catch (e) {
        if (e instanceof AirGapError)
          throw new CliExit(
            1,
            `the service at ${client.shown} sent a request that is not valid: ${e.message}`,
          );
        throw e;
      }
      const text = `${JSON.stringify(r.envelope, null, 2)}\n`;
      const where = await writePayload(
        text,
        { ...opts, ...(opts.qrInterval !== undefined ? { qrIntervalMs: opts.qrInterval } : {}) },
        'request',
      );
      const x = r.export;
      process.stderr.write(
        `export ${x.id} (${x.status}) party ${x.party}${x.withdrawalId ? ` withdrawal ${x.withdrawalId}` : ''} window latest ${x.windowLatest} hashes ${x.hashes.join(',')}${where.length ? `; ${where.join('; ')}` : ''}\n`,
      );
      if (x.status !== 'open')
        process.stderr.write(`note: export ${x.id} is ${x.status}: a response to it will not be accepted\n`);
    },
  );

  connectionOptions(
    program
      .command('import')
      .description(
        "Hand an offline signer's response to the service: checked there, then the withdrawal (or sign request) goes on",
      )
      .argument('[response]', 'response file; "-" for stdin; or a folder of QR frame PNGs')
      .option('--from-qr <dir>', 'read the response from a folder of QR frame PNGs')
      .option('--json', "print the service's answer as JSON"),
  ).action(async (response: string | undefined, opts: ClientOpts & { fromQr?: string; json?: boolean }) => {
    const client = clientFrom(opts);
    const text = await readResponseText(response, opts.fromQr);
    try {
      parseResponse(text); // refused here, naming the field, before anything is sent
    } catch (e) {
      if (e instanceof AirGapError)
        throw new UsageError(
          `not sent: ${e.message}${e.field && !e.message.includes(e.field) ? ` (${e.field})` : ''}`,
        );
      throw e;
    }
    const r = await client.call<ImportResult>('POST', '/v1/air-gap/imports', { body: text.trim() });
    if (opts.json) {
      process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
      return;
    }
    const lines = [`imported: export ${r.export.id} is ${r.export.status} (party ${r.export.party})`];
    if (r.withdrawal)
      lines.push(
        `withdrawal ${r.withdrawal.id} is ${r.withdrawal.state}${r.withdrawal.updateId ? ` (update ${r.withdrawal.updateId})` : ''}`,
      );
    if (r.executed)
      lines.push(
        `executed: update ${r.executed.updateId} command ${r.executed.commandId} offset ${r.executed.completionOffset}`,
      );
    if (r.onboarded) lines.push(`onboarded: party ${r.onboarded.partyId} (${r.onboarded.status})`);
    process.stdout.write(`${lines.join('\n')}\n`);
  });
}
