/**
 * Reads a prepared transaction for a command: from a file or standard input,
 * as base64 text, raw protobuf bytes, or a JSON document that carries it
 * (Ledger API `preparedTransaction`, validator `transaction`, or the test
 * vectors' `prepared_transaction_base64`).
 */
import { readFileSync, statSync } from 'node:fs';
import { TransactionError } from '../hashing/errors.js';
import { base64ToBytes } from '../hashing/input.js';
import { describeBytes, describeJson, EXPECTED_INPUT } from './input-kind.js';

export type InputFormat = 'auto' | 'base64' | 'raw' | 'json';

export const INPUT_FORMATS: readonly InputFormat[] = ['auto', 'base64', 'raw', 'json'];

const JSON_KEYS = [
  'preparedTransaction',
  'prepared_transaction',
  'transaction',
  'prepared_transaction_base64',
];

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Inputs (transactions, air-gap payloads) larger than this are refused before parsing. */
export const MAX_INPUT_BYTES = 64 * 1024 * 1024;

function tooLarge(what: string): UsageError {
  return new UsageError(`${what} is larger than ${MAX_INPUT_BYTES} bytes: refused`);
}

export async function readSource(file: string | undefined): Promise<Buffer> {
  if (file !== undefined && file !== '-') {
    try {
      if (statSync(file).size > MAX_INPUT_BYTES) throw tooLarge(file);
      return readFileSync(file);
    } catch (e) {
      if (e instanceof UsageError) throw e;
      throw new UsageError(`cannot read ${file}: ${readProblem((e as NodeJS.ErrnoException).code)}`);
    }
  }
  if (process.stdin.isTTY)
    throw new UsageError('no input: give a FILE or pipe the transaction on standard input');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of process.stdin) {
    size += (c as Buffer).length;
    if (size > MAX_INPUT_BYTES) throw tooLarge('standard input');
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}

/** A read error as words and the next step (the system code only when it is not one of these). */
function readProblem(code: string | undefined): string {
  switch (code) {
    case 'ENOENT':
      return 'no such file';
    case 'EISDIR':
      return 'it is a directory, not a file; give the path of a file, or "-" to read standard input';
    case 'EACCES':
    case 'EPERM':
      return "permission denied; check the file's permissions or run as its owner";
    case 'ENOTDIR':
      return 'a part of the path is a file, not a directory; check the path';
    default:
      return `read error (${code ?? 'unknown'})`;
  }
}

export function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/**
 * An air-gap payload's text (`name` is REQUEST or RESPONSE): a file, '-'
 * (stdin), or a folder of QR frame PNGs (the argument itself, or `fromQr`).
 * The QR reader is loaded only when frames are read.
 */
export async function readPayloadText(
  name: 'REQUEST' | 'RESPONSE',
  path: string | undefined,
  fromQr: string | undefined,
): Promise<string> {
  if (path !== undefined && fromQr !== undefined)
    throw new UsageError(`give either ${name} or --from-qr DIR, not both`);
  const qrDir = fromQr ?? (path !== undefined && path !== '-' && isDirectory(path) ? path : undefined);
  if (qrDir !== undefined) {
    const { readQrPngs } = await import('../offline/qr.js');
    return readQrPngs(qrDir);
  }
  if (path === undefined) throw new UsageError(`give the ${name} file ("-" for stdin) or --from-qr DIR`);
  if (path === '-' && process.stdin.isTTY)
    throw new UsageError(`no input: give a ${name} file or pipe it on standard input`);
  return (await readSource(path)).toString('utf8');
}

function isBase64Text(b: Buffer): boolean {
  for (const c of b) {
    const ok =
      (c >= 0x41 && c <= 0x5a) ||
      (c >= 0x61 && c <= 0x7a) ||
      (c >= 0x30 && c <= 0x39) ||
      c === 0x2b ||
      c === 0x2f ||
      c === 0x3d ||
      c === 0x20 ||
      c === 0x0a ||
      c === 0x0d ||
      c === 0x09;
    if (!ok) return false;
  }
  return true;
}

/** Where the bytes of a transaction input came from, for messages. */
interface TransactionInput {
  bytes: Uint8Array;
  /** `README.md`, `standard input`, `the base64 text of standard input`, `the base64 in JSON field … of x.json`. */
  origin: string;
}

function isBlank(data: Buffer): boolean {
  return data.every((c) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09);
}

/** The name of the input in messages: the file, or standard input. */
export function sourceName(file: string | undefined): string {
  return file === undefined || file === '-' ? 'standard input' : file;
}

/** Turns file contents into protobuf bytes according to `format`; `source` names the input in messages. */
function readTransactionInput(data: Buffer, format: InputFormat, source: string): TransactionInput {
  if (isBlank(data))
    throw new UsageError(
      `the input is empty (${source} holds ${data.length === 0 ? 'nothing' : 'only whitespace'}): ${EXPECTED_INPUT}`,
    );
  let fmt = format;
  if (fmt === 'auto') {
    const first = data.find((c) => c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09);
    if (first === 0x7b) fmt = 'json';
    else fmt = isBase64Text(data) ? 'base64' : 'raw';
  }
  switch (fmt) {
    case 'raw':
      return { bytes: new Uint8Array(data.buffer, data.byteOffset, data.byteLength), origin: source };
    case 'base64':
      // Files from `base64` are wrapped at 76 columns: line breaks and spaces carry no data here.
      return {
        bytes: base64ToBytes(data.toString('latin1').replace(/[ \t\r\n]+/g, ''), 'input'),
        origin: `the base64 text of ${source}`,
      };
    case 'json': {
      let doc: unknown;
      try {
        doc = JSON.parse(data.toString('utf8'));
      } catch {
        throw new TransactionError('bad_encoding', '', `${source} is not valid JSON`);
      }
      if (typeof doc === 'object' && doc !== null)
        for (const k of JSON_KEYS) {
          const v = (doc as Record<string, unknown>)[k];
          if (typeof v === 'string')
            return {
              bytes: base64ToBytes(v, `JSON field ${k}`),
              origin: `the base64 in JSON field ${k} of ${source}`,
            };
        }
      throw new TransactionError(
        'bad_encoding',
        '',
        describeJson(doc, source) ??
          `${source} is JSON without a prepared transaction: none of the fields ${JSON_KEYS.join(', ')} holds base64 text`,
      );
    }
    default:
      throw new UsageError(`unknown input format ${String(format)}`);
  }
}

/**
 * Reads the prepared transaction of `hash` or `inspect` from `file` (or
 * standard input) and runs `use` on its bytes. When they are refused and are
 * plainly something else (text, an image, binary data that cannot start a
 * PreparedTransaction), the refusal says so in one sentence, with the
 * decoder's detail after it; a refusal of what may be a real transaction is
 * passed on unchanged.
 */
export async function withTransaction<T>(
  file: string | undefined,
  format: InputFormat,
  use: (bytes: Uint8Array) => T,
): Promise<T> {
  const input = readTransactionInput(await readSource(file), format, sourceName(file));
  try {
    return use(input.bytes);
  } catch (e) {
    if (!(e instanceof TransactionError)) throw e;
    const seems = describeBytes(input.bytes);
    if (seems === undefined) throw e;
    const raw = input.origin === sourceName(file);
    // Text read as raw bytes was neither JSON nor base64 (or was forced to be read raw).
    const what =
      seems.what === 'text' && raw && format === 'auto' ? 'text, neither base64 nor JSON' : seems.what;
    const detail = seems.known ? '' : ` (the decoder: ${e.message})`;
    throw new TransactionError(
      'bad_encoding',
      '',
      `${input.origin} ${raw ? 'is' : 'decodes to'} ${what}, not a prepared transaction${detail}; ${EXPECTED_INPUT}`,
    );
  }
}
