/**
 * `canton-signer offline verify|sign REQUEST`: the air-gapped machine's half
 * of cold signing. A request exported by the online service (a JSON file, '-'
 * for stdin, or a folder of QR frame PNGs) is opened against the export keys
 * this machine trusts, checked again from its bytes (src/offline/review.ts),
 * shown in full, confirmed by a person typing "sign", signed with a file key
 * or an HSM key, and answered with a response file (and QR frames).
 *
 * This module and everything it loads open no socket: the CLI entry loads it
 * on its own for `offline …` (offlineMain), without the network clients, the
 * server or the database driver. Exit codes: 0 verified / signed, 1 refused
 * (the request, the key or the operator said no; nothing written), 2 usage.
 */
import { createPublicKey, randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { link, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { Command, CommanderError, Option } from 'commander';
import { oneLine } from '../canton/errors.js';
import { Refusal } from '../flows/refusal.js';
import { TransactionError } from '../hashing/errors.js';
import { bytesToHex } from '../hashing/input.js';
import { KeyError } from '../keys/backend.js';
import { openSigner } from '../keys/config.js';
import { schemeOfKey } from '../keys/schemes.js';
import {
  AirGapError,
  parseRequestEnvelope,
  type TrustedExportKey,
  trustedExportKey,
} from '../offline/format.js';
import { findSigningKey, type Review, reviewRequest, signReview } from '../offline/review.js';
import { isDirectory, readPayloadText, UsageError } from './input.js';
import { CliExit, finishProgram, keystoreFolder } from './options.js';
import { fileErrorText, keyErrorText } from './system-errors.js';

export const TRUSTED_KEYS_ENV = 'CANTON_SIGNER_TRUSTED_EXPORT_KEYS';
export const DEFAULT_MIN_WINDOW_MS = 5 * 60_000;

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, min: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `0`, `90s`, `5m`, `1h`, `2d`, `500ms`. */
export function parseMinWindow(s: string): number {
  const t = s.trim();
  if (t === '0') return 0;
  const m = /^(\d+)(ms|s|m|min|h|d)$/.exec(t);
  if (!m) throw new UsageError(`--min-window: not a duration such as 0, 90s, 5m, 1h or 2d: ${s}`);
  return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
}

/** An export public key from a file: PEM (BEGIN PUBLIC KEY), base64 SPKI DER, or SPKI DER bytes. */
export function readTrustedKey(path: string, data: Buffer): TrustedExportKey {
  const text = data.toString('latin1');
  if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text))
    throw new UsageError(`${path} holds a PRIVATE key: trust the export key's public key only`);
  let spki: Uint8Array;
  if (text.includes('-----BEGIN PUBLIC KEY-----')) {
    try {
      spki = new Uint8Array(
        createPublicKey({ key: text, format: 'pem' }).export({ type: 'spki', format: 'der' }),
      );
    } catch {
      throw new UsageError(`${path}: the PEM public key cannot be read`);
    }
  } else {
    const b64 = text.replace(/\s+/g, '');
    spki =
      /^[A-Za-z0-9+/]+={0,2}$/.test(b64) && b64.length % 4 === 0
        ? new Uint8Array(Buffer.from(b64, 'base64'))
        : new Uint8Array(data);
  }
  let scheme: ReturnType<typeof schemeOfKey>;
  try {
    scheme = schemeOfKey(createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' }));
  } catch {
    throw new UsageError(`${path} is not a public key (give PEM or base64 SubjectPublicKeyInfo DER)`);
  }
  if (!scheme)
    throw new UsageError(`${path} is not an Ed25519 or ECDSA (P-256, P-384, secp256k1) public key`);
  return trustedExportKey(scheme, spki);
}

/** The trusted export keys: each --trust file, then each path in $CANTON_SIGNER_TRUSTED_EXPORT_KEYS. */
export async function loadTrustedKeys(
  files: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<TrustedExportKey[]> {
  const fromEnv = (env[TRUSTED_KEYS_ENV] ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  const out: TrustedExportKey[] = [];
  for (const path of [...files, ...fromEnv]) {
    let data: Buffer;
    try {
      data = await readFile(path);
    } catch (e) {
      throw new UsageError(
        `cannot read the trusted export key: ${fileErrorText(e, { path, next: `check --trust and ${TRUSTED_KEYS_ENV}` }) ?? path}`,
      );
    }
    const k = readTrustedKey(path, data);
    if (!out.some((x) => x.fingerprint === k.fingerprint)) out.push(k);
  }
  if (out.length === 0)
    throw new UsageError(
      `no trusted export key: give --trust FILE (the online service's export public key) or set ${TRUSTED_KEYS_ENV}`,
    );
  return out;
}

/** The request text: a file, '-' (stdin), or a folder of QR frame PNGs (REQUEST or --from-qr). */
const readRequestText = (request: string | undefined, fromQr: string | undefined) =>
  readPayloadText('REQUEST', request, fromQr);

interface CommonOpts {
  trust?: string[];
  minWindow?: string;
  fromQr?: string;
}

async function review(request: string | undefined, opts: CommonOpts): Promise<Review> {
  const minWindowMs = opts.minWindow !== undefined ? parseMinWindow(opts.minWindow) : DEFAULT_MIN_WINDOW_MS;
  const trusted = await loadTrustedKeys(opts.trust ?? []);
  const text = await readRequestText(request, opts.fromQr);
  return reviewRequest(parseRequestEnvelope(text), { trusted, minWindowMs });
}

function reviewJson(r: Review): Record<string, unknown> {
  return {
    ok: true,
    kind: r.kind,
    partyId: r.party.partyId,
    key: { fingerprint: r.key.fingerprint, scheme: r.key.scheme },
    hashes: r.hashes.map(bytesToHex),
    window: {
      ...(r.window.earliest ? { earliest: r.window.earliest } : {}),
      latest: r.window.latest,
      latestSource: r.window.latestSource,
    },
    actions: r.actions,
    exporter: r.exporter,
    digest: r.envelope.digest,
    nonce: r.request.nonce,
    createdAt: r.request.createdAt,
    ...(r.request.kind === 'prepared-transaction'
      ? { commandId: r.request.commandId, intent: r.request.intent }
      : { expect: r.request.expect }),
  };
}

/** Asks on the terminal; true only when the operator typed exactly "sign". */
async function confirmOnTerminal(r: Review): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
  try {
    const n = r.hashes.length;
    const answer = await new Promise<string>((resolve) => {
      rl.question(
        `Type "sign" to sign ${n === 1 ? 'this hash' : `these ${n} hashes`} for ${r.party.partyId} with key ${r.key.fingerprint} (anything else refuses): `,
        resolve,
      );
    });
    return answer.trim() === 'sign';
  } finally {
    rl.close();
  }
}

/** Writes `text` to `path` atomically (temp file + link/rename); an existing file is kept unless `force`. */
/**
 * Writes an air-gap payload where the operator asked: `out` (never over an
 * existing file unless `force`) or stdout, and as QR frame PNGs into `qr`.
 * Returns what was written where, for the one-line note.
 */
export async function writePayload(
  text: string,
  opts: QrOutputOpts & { out?: string; force?: boolean },
  what: string,
): Promise<string[]> {
  if (opts.out !== undefined) await writeNew(opts.out, text, opts.force === true);
  else process.stdout.write(text);
  const where = [opts.out !== undefined ? `${what} written to ${opts.out}` : ''];
  if (opts.qr !== undefined || opts.qrHtml !== undefined || opts.qrShow) {
    const qr = await import('../offline/qr.js');
    if (opts.qr !== undefined) {
      const frames = await qr.writeQrPngs(text, opts.qr);
      where.push(`${frames.length} QR frame(s) in ${opts.qr}`);
    }
    if (opts.qrHtml !== undefined) {
      await writeNew(opts.qrHtml, await qr.renderHtmlAnimation(text), opts.force === true);
      where.push(`animated QR page ${opts.qrHtml}`);
    }
    if (opts.qrShow) {
      // The frames cycle on the terminal (stderr) until Ctrl-C, or for --qr-loops passes.
      const stop = new AbortController();
      const onInt = () => stop.abort();
      process.once('SIGINT', onInt);
      try {
        const frames = qr.renderTerminalFrames(text);
        await qr.animate(frames, (t) => process.stderr.write(t), opts.qrIntervalMs ?? 700, stop.signal, {
          ...(opts.qrLoops !== undefined ? { loops: opts.qrLoops } : {}),
        });
        where.push(`${frames.length} QR frame(s) shown`);
      } finally {
        process.off('SIGINT', onInt);
      }
    }
  }
  return where.filter(Boolean);
}

const QR_FRAME = /^frame-\d+-of-\d+\.png$/;

/**
 * Refuses, before anything is signed or asked of a service, an output that
 * would overwrite a file (without --force) or mix frames into a folder that
 * already holds some: nothing is written half-way.
 */
export function checkPayloadTargets(opts: QrOutputOpts & { out?: string; force?: boolean }): void {
  for (const [file, flag] of [
    [opts.out, '--out'],
    [opts.qrHtml, '--qr-html'],
  ] as const)
    if (file !== undefined && !opts.force && existsSync(file))
      throw new UsageError(`${file} already exists: not overwritten (give another ${flag}, or --force)`);
  if (opts.qr !== undefined && isDirectory(opts.qr) && readdirSync(opts.qr).some((f) => QR_FRAME.test(f)))
    throw new UsageError(`${opts.qr} already holds QR frames: give an empty or new folder to --qr`);
}

export interface QrOutputOpts {
  qr?: string;
  qrHtml?: string;
  qrShow?: boolean;
  qrLoops?: number;
  qrIntervalMs?: number;
}

/** The QR output options of `offline sign` and `export`. */
export function qrOutputOptions(c: Command, what: string): Command {
  return c
    .option('--qr <dir>', `also write the ${what} as QR frame PNGs into this (empty or new) folder`)
    .option('--qr-html <file>', `also write a page that shows the ${what}'s QR frames one after another`)
    .option('--qr-show', `show the ${what}'s QR frames one after another on this terminal (Ctrl-C stops)`)
    .option('--qr-loops <n>', 'with --qr-show: stop after this many passes', (v) =>
      positiveInt(v, '--qr-loops'),
    )
    .option('--qr-interval <ms>', 'with --qr-show: milliseconds per frame (default 700)', (v) =>
      positiveInt(v, '--qr-interval'),
    );
}

function positiveInt(v: string, name: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 1_000_000) throw new UsageError(`${name}: a whole number from 1`);
  return n;
}

export async function writeNew(path: string, text: string, force: boolean): Promise<void> {
  if (!force && existsSync(path))
    throw new UsageError(`${path} already exists: not overwritten (give another --out, or --force)`);
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  await writeFile(tmp, text, { flag: 'wx' });
  try {
    if (force) await rename(tmp, path);
    else {
      try {
        await link(tmp, path); // fails if the file appeared meanwhile: never replaced
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EEXIST')
          throw new UsageError(`${path} already exists: not overwritten (give another --out, or --force)`);
        throw e;
      }
    }
  } finally {
    await unlink(tmp).catch(() => {});
  }
}

/** Refusals of the request or of the operator as the CLI reports them (exit 1). */
function refusedExit(e: unknown): never {
  if (e instanceof AirGapError)
    throw new CliExit(
      1,
      e.code === 'refused' ? `not signed: ${e.message}` : `refused (${e.code}): ${e.message}`,
    );
  if (e instanceof Error && e.name === 'QrTransportError')
    throw new CliExit(1, `refused (qr ${(e as Error & { code: string }).code}): ${e.message}`);
  throw e;
}

/** The frame files src/offline/qr.ts writes. */

const collect = (v: string, prev: string[] | undefined): string[] => [...(prev ?? []), v];

export function registerOffline(program: Command): void {
  const offline = program
    .command('offline')
    .description(
      'Air-gapped signing: check and sign a request exported by the online service, on a machine without network',
    );
  const trustOpt = () =>
    new Option(
      '--trust <file>',
      `a trusted export public key (PEM or base64 SPKI DER); repeatable; also $${TRUSTED_KEYS_ENV} (comma-separated paths)`,
    ).argParser(collect);
  const minWindowOpt = () =>
    new Option(
      '--min-window <duration>',
      'refuse requests whose window closes sooner than this from now, e.g. 0, 90s, 5m, 1h (default: 5m)',
    );
  const fromQrOpt = () => new Option('--from-qr <dir>', 'read the request from a folder of QR frame PNGs');

  offline
    .command('verify')
    .description('Check a request and show everything it would sign, without signing')
    .argument('[request]', 'request file; "-" for stdin; or a folder of QR frame PNGs')
    .addOption(trustOpt())
    .addOption(minWindowOpt())
    .addOption(fromQrOpt())
    .option('--json', 'print the checked request as JSON instead of the summary')
    .action(async (request: string | undefined, opts: CommonOpts & { json?: boolean }) => {
      let r: Review;
      try {
        r = await review(request, opts);
      } catch (e) {
        refusedExit(e);
      }
      process.stdout.write(
        opts.json
          ? `${JSON.stringify(reviewJson(r), null, 2)}\n`
          : `${r.summary}\nOK: the request verifies; nothing was signed.\n`,
      );
    });

  qrOutputOptions(
    offline
      .command('sign')
      .description(
        'Check a request, show it, ask for confirmation ("sign") and sign it with the party\'s key (file keystore or HSM)',
      )
      .argument('[request]', 'request file; "-" for stdin; or a folder of QR frame PNGs')
      .option(
        '--out <file>',
        'write the response here (default: stdout); an existing file is not overwritten',
      )
      .option('--force', 'overwrite an existing --out file'),
    'response',
  )
    .addOption(trustOpt())
    .option('--key <label>', "the key to sign with (default: the key here with the request's fingerprint)")
    .addOption(minWindowOpt())
    .addOption(fromQrOpt())
    .option('--keystore <dir>', 'keystore folder (default $CANTON_SIGNER_KEYSTORE or ./keystore)')
    .option('--yes', 'sign without asking (scripted tests only: nobody reads the summary)')
    .action(
      async (
        request: string | undefined,
        opts: CommonOpts &
          QrOutputOpts & {
            out?: string;
            force?: boolean;
            qrInterval?: number;
            key?: string;
            keystore?: string;
            yes?: boolean;
          },
      ) => {
        checkPayloadTargets(opts);
        try {
          const r = await review(request, opts);
          const signer = await openSigner({ keystore: keystoreFolder(opts.keystore), interactive: true });
          let text: string;
          try {
            // Before the summary is shown: the key is here and the keystore opens (its passphrase is
            // given or can be asked for), so a request that cannot be signed fails in one line.
            const key = await findSigningKey(r, signer, opts.key);
            if (key.backend === 'file') await signer.checkAccess();
            process.stderr.write(`${r.summary}\n`);
            if (!opts.yes) {
              if (!process.stdin.isTTY || request === '-')
                throw new AirGapError(
                  'refused',
                  'no terminal to confirm on: run offline sign on a terminal (or --yes in scripted tests); nothing was written',
                );
              if (!(await confirmOnTerminal(r)))
                throw new AirGapError('refused', 'the operator did not confirm; nothing was written');
            }
            text = `${JSON.stringify(await signReview(r, signer, { keyLabel: key.label }), null, 2)}\n`;
          } finally {
            await signer.close();
          }
          const where = await writePayload(
            text,
            { ...opts, ...(opts.qrInterval !== undefined ? { qrIntervalMs: opts.qrInterval } : {}) },
            'response',
          );
          const line = `signed ${r.hashes.length} hash${r.hashes.length === 1 ? '' : 'es'} for ${r.party.partyId}${where.length ? `; ${where.join('; ')}` : ''}\n`;
          // stdout carries the response when there is no --out; the note then goes to stderr.
          (opts.out !== undefined ? process.stdout : process.stderr).write(line);
        } catch (e) {
          refusedExit(e);
        }
      },
    );
}

/**
 * The `offline` commands on their own, for the CLI entry: the same exit
 * conventions as src/cli/main.ts without loading the online commands.
 */
export async function offlineMain(argv: string[]): Promise<number> {
  const program = new Command();
  program.name('canton-signer').exitOverride();
  registerOffline(program);
  finishProgram(program);
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (e) {
    const say = (m: string) => process.stderr.write(`canton-signer: ${oneLine(m)}\n`);
    if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : 2;
    if (e instanceof CliExit) {
      say(e.message);
      return e.exitCode;
    }
    if (e instanceof Refusal) {
      say(`refused (${e.reason}): ${e.message}`);
      return 1;
    }
    if (e instanceof KeyError) {
      say(keyErrorText(e));
      return 1;
    }
    if (e instanceof UsageError) {
      say(e.message);
      return 2;
    }
    if (e instanceof TransactionError) {
      say(`refused: ${e.message}`);
      return 2;
    }
    say(`internal error: ${e instanceof Error ? e.message : String(e)}`);
    return 70;
  }
}
