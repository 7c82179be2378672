/**
 * Reads a prepared transaction for a command: from a file or standard input,
 * as base64 text, raw protobuf bytes, or a JSON document that carries it
 * (Ledger API `preparedTransaction`, validator `transaction`, or the test
 * vectors' `prepared_transaction_base64`).
 */
import { readFileSync, statSync } from 'node:fs';
import { TransactionError } from '../hashing/errors.js';
import { base64ToBytes } from '../hashing/input.js';

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
      const code = (e as NodeJS.ErrnoException).code;
      throw new UsageError(
        `cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : (code ?? 'read error')}`,
      );
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

/** Turns file contents into protobuf bytes according to `format`. */
export function transactionBytes(data: Buffer, format: InputFormat): Uint8Array {
  if (data.length === 0) throw new UsageError('input is empty');
  let fmt = format;
  if (fmt === 'auto') {
    const first = data.find((c) => c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09);
    if (first === 0x7b) fmt = 'json';
    else fmt = isBase64Text(data) ? 'base64' : 'raw';
  }
  switch (fmt) {
    case 'raw':
      return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    case 'base64':
      // Files from `base64` are wrapped at 76 columns: line breaks and spaces carry no data here.
      return base64ToBytes(data.toString('latin1').replace(/[ \t\r\n]+/g, ''), 'input');
    case 'json': {
      let doc: unknown;
      try {
        doc = JSON.parse(data.toString('utf8'));
      } catch {
        throw new TransactionError('bad_encoding', '', 'input is not valid JSON');
      }
      if (typeof doc === 'object' && doc !== null)
        for (const k of JSON_KEYS) {
          const v = (doc as Record<string, unknown>)[k];
          if (typeof v === 'string') return base64ToBytes(v, `JSON field ${k}`);
        }
      throw new TransactionError(
        'bad_encoding',
        '',
        `JSON input has none of the fields ${JSON_KEYS.join(', ')} holding a base64 prepared transaction`,
      );
    }
    default:
      throw new UsageError(`unknown input format ${String(format)}`);
  }
}
