/**
 * What an input given to `hash` or `inspect` seems to be when it plainly is
 * not a prepared transaction: text, an image or archive, another
 * canton-signer document. Used only to word a refusal as one sentence a
 * person understands instead of the first protobuf field the decoder could
 * not read; input that may be a (malformed) transaction is left to the
 * decoder's precise refusal.
 */
import { INSPECT_FORMAT } from '../intent/inspect-format.js';
import { REQUEST_FORMAT, RESPONSE_FORMAT } from '../offline/format-names.js';

/** What `hash` and `inspect` take, said once for every refusal of this module. */
export const EXPECTED_INPUT =
  'give a prepared transaction as base64 text, as raw protobuf bytes, or as JSON with its base64 in preparedTransaction';

/** Leading bytes of common file formats (checked in this order). */
const MAGIC: readonly (readonly [string, number[]])[] = [
  ['a PNG image', [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]],
  ['a JPEG image', [0xff, 0xd8, 0xff]],
  ['a GIF image', [0x47, 0x49, 0x46, 0x38]],
  ['a PDF document', [0x25, 0x50, 0x44, 0x46, 0x2d]],
  ['a ZIP archive (or a file stored as one: .dar, .jar, .docx)', [0x50, 0x4b, 0x03, 0x04]],
  ['a gzip-compressed file', [0x1f, 0x8b]],
  ['an executable program', [0x7f, 0x45, 0x4c, 0x46]],
];

/** Field 1 (`transaction`) or field 2 (`metadata`), both length-delimited: every PreparedTransaction starts so. */
const FIRST_BYTES = new Set([0x0a, 0x12]);

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Valid UTF-8 without control characters other than tab, line breaks and form feed. */
function isText(b: Uint8Array): boolean {
  let s: string;
  try {
    s = utf8.decode(b);
  } catch {
    return false;
  }
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0c && c !== 0x0d) || c === 0x7f) return false;
  }
  return true;
}

/**
 * What `bytes` seem to be when they cannot be a PreparedTransaction: a noun
 * phrase ("a PNG image", "text"), and whether that is a recognised kind of
 * file (then the decoder's detail says nothing more); `undefined` when they
 * might be a transaction.
 */
export function describeBytes(bytes: Uint8Array): { what: string; known: boolean } | undefined {
  for (const [what, magic] of MAGIC)
    if (bytes.length >= magic.length && magic.every((m, i) => bytes[i] === m)) return { what, known: true };
  if (isText(bytes)) return { what: 'text', known: true };
  if (bytes.length > 0 && !FIRST_BYTES.has(bytes[0]!))
    return { what: 'binary data that does not start as a PreparedTransaction does', known: false };
  return undefined;
}

/**
 * What a JSON document without a prepared-transaction field is, and which
 * command takes it, as a sentence about `source`; `undefined` when it is not
 * one of the documents recognised here.
 */
export function describeJson(doc: unknown, source: string): string | undefined {
  if (typeof doc !== 'object' || doc === null) return undefined;
  const d = doc as Record<string, unknown>;
  const request = d.request as Record<string, unknown> | undefined;
  if (typeof request?.format === 'string' && request.format.startsWith(REQUEST_FORMAT.split('@')[0]!)) {
    const kind = request.kind === 'topology-transactions' ? 'onboarding (topology) ' : '';
    return `${source} is a canton-signer air-gap ${kind}request, not a prepared transaction: check and sign it on the offline machine with \`canton-signer offline verify ${source} --trust EXPORT-KEY.pem\` and \`canton-signer offline sign\``;
  }
  if (typeof d.format === 'string' && d.format.startsWith(RESPONSE_FORMAT.split('@')[0]!))
    return `${source} is a canton-signer air-gap response, not a prepared transaction: the online side takes it with \`canton-signer import ${source}\``;
  if (d.format === INSPECT_FORMAT)
    return `${source} is a report of \`canton-signer inspect --json\`, not a prepared transaction: run the command on the transaction the report was made from`;
  const prepared = d.preparedTransaction ?? d.prepared_transaction;
  if (typeof prepared === 'object' && prepared !== null)
    return `${source} holds preparedTransaction as a JSON object (the proto3 JSON form that gRPC tools print), not as base64 text: give the prepare response of the JSON Ledger API, or the base64 bytes`;
  return undefined;
}
