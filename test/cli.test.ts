/**
 * Black-box tests of the `canton-signer` command: every case spawns
 * `node bin/canton-signer.js …` (which runs the compiled dist/) and looks only
 * at the exit code, stdout and stderr. The contract under test (docs/cli.md):
 *
 * - `hash` prints 64 lowercase hex characters and a newline, nothing else;
 * - exit 0 ok, 1 a check failed (`--expect` mismatch), 2 refused input or bad
 *   usage (70 internal error);
 * - on any failure stdout is empty and stderr is exactly one line, and a
 *   refusal names its code and the protobuf path of the offending field;
 * - `inspect` shows every node, the metadata and what the scheme covers, and
 *   ends with the hash; `inspect --json` is the `canton-signer/inspect@1`
 *   document (docs/inspect-json.md), nodes in pre-order from the roots;
 * - a pipeline refusal exits 1 with one stderr line; with `--json` it is also
 *   one JSON object on stdout (reason, message, problems and details when any).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../src/hashing/decode.js';
import { encodePreparedTransaction } from '../src/hashing/encode.js';
import type { DecodedTransaction, NodeBody } from '../src/hashing/model.js';
import { type CliRun, ROOT, runCli } from './support/cli.js';
import { VECTORS_DIR as VECTORS } from './support/vectors.js';

interface RealVector {
  name: string;
  prepared_transaction_base64: string;
  expected_hash_hex: string;
  expected_hash_base64: string;
  reference_v3_hex: string;
}

interface NegativeVector {
  prepared_transaction_base64: string;
  expected_hash_hex: string;
  expected_hash_base64: string;
  reference_check: { reference_v2_hex: string; reference_v3_hex: string };
}

const realFiles = readdirSync(join(VECTORS, 'real'))
  .filter((f) => f.endsWith('.json'))
  .sort();
const real = realFiles.map((file) => ({
  file,
  path: join(VECTORS, 'real', file),
  v: JSON.parse(readFileSync(join(VECTORS, 'real', file), 'utf8')) as RealVector,
}));
const byFile = (prefix: string) => {
  const found = real.find((r) => r.file.startsWith(prefix));
  if (!found) throw new Error(`no real vector ${prefix}`);
  return found;
};
const NEGATIVE_PATH = join(VECTORS, 'negative', 'v2_bitgo_invalidonesteppreapprovalprepareresponse.json');
const negative = JSON.parse(readFileSync(NEGATIVE_PATH, 'utf8')) as NegativeVector;

/** A small vector (one create, no input contracts) and a token transfer with 7 nodes. */
const PING = byFile('v2_canton_network_wallet_sdk_utils_ping');
const TRANSFER = byFile('v2_bitgo_cantontokentransferprepareresponse');

// ---- running the command -------------------------------------------------------

type Run = CliRun;

/** Runs the command with `args`; `input` (or nothing) on standard input. */
const cli = (args: string[], input: string | Uint8Array = ''): Promise<Run> => runCli(args, { input });

const HEX64 = /^[0-9a-f]{64}$/;

function expectHash(r: Run, hex: string): void {
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  expect(r.stdout).toBe(`${hex}\n`);
}

/** A failure: the given exit code, nothing on stdout, exactly one line on stderr (returned). */
function expectFailure(r: Run, status: number): string {
  expect(r.stdout).toBe('');
  expect(r.stderr).toMatch(/^[^\n]+\n$/);
  expect(r.status).toBe(status);
  return r.stderr.trimEnd();
}

/** A refusal line: `canton-signer: refused: <code> at <path>: <detail>` (no ` at …` for the whole input). */
function expectRefused(r: Run, code: string, path: string): string {
  const line = expectFailure(r, 2);
  if (path === '') expect(line).toMatch(new RegExp(`^canton-signer: refused: ${code}: \\S`));
  else expect(line.startsWith(`canton-signer: refused: ${code} at ${path}: `)).toBe(true);
  return line;
}

// ---- inputs written for the tests --------------------------------------------------

let dir = '';
const tmp = (name: string, data: string | Uint8Array): string => {
  const p = join(dir, name);
  writeFileSync(p, data);
  return p;
};
const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');
const bytesOf = (v: RealVector): Uint8Array =>
  new Uint8Array(Buffer.from(v.prepared_transaction_base64, 'base64'));

function varint(n: number): number[] {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return out;
}

function readVarint(b: Uint8Array, pos: number): [number, number] {
  let v = 0;
  let scale = 1;
  let p = pos;
  for (;;) {
    const x = b[p++];
    if (x === undefined) throw new Error('test helper: truncated varint');
    v += (x & 0x7f) * scale;
    if (x < 0x80) return [v, p];
    scale *= 0x80;
  }
}

/**
 * Appends `extra` to the innermost message reached by following the first
 * length-delimited occurrence of each field number in `path`, rewriting the
 * length prefixes of the enclosing messages.
 */
function appendInside(b: Uint8Array, path: number[], extra: number[]): Uint8Array {
  const [field, ...rest] = path;
  if (field === undefined) return Buffer.concat([b, Uint8Array.from(extra)]);
  let p = 0;
  while (p < b.length) {
    const start = p;
    const [tag, afterTag] = readVarint(b, p);
    const wt = tag & 7;
    if (wt === 2) {
      const [len, payload] = readVarint(b, afterTag);
      const end = payload + len;
      if (Math.floor(tag / 8) === field) {
        const inner = appendInside(b.subarray(payload, end), rest, extra);
        return Buffer.concat([
          b.subarray(0, start),
          Uint8Array.from([...varint(field * 8 + 2), ...varint(inner.length)]),
          inner,
          b.subarray(end),
        ]);
      }
      p = end;
    } else if (wt === 0) p = readVarint(b, afterTag)[1];
    else if (wt === 1) p = afterTag + 8;
    else if (wt === 5) p = afterTag + 4;
    else throw new Error(`test helper: wire type ${wt}`);
  }
  throw new Error(`test helper: no field ${field}`);
}

/** Field 99, varint 1: a field number no PreparedTransaction message has. */
const UNKNOWN_FIELD = [...varint(99 * 8), 1];

/** Independent pre-order walk of the decoded model (recursive: fine for the real vectors). */
function preOrder(tx: DecodedTransaction): { id: string; parent: string | null; depth: number }[] {
  const out: { id: string; parent: string | null; depth: number }[] = [];
  const visit = (id: string, parent: string | null, depth: number) => {
    out.push({ id, parent, depth });
    const n = tx.nodeById.get(id)!;
    if (n.type === 'exercise' || n.type === 'rollback') for (const c of n.children) visit(c, id, depth + 1);
  };
  for (const r of tx.transaction.roots) visit(r, null, 0);
  return out;
}

function templateOf(n: NodeBody): string | undefined {
  if (n.type === 'rollback') return undefined;
  return `${n.packageName}:${n.templateId.moduleName}:${n.templateId.entityName}`;
}

/** The ping transaction with a max_record_time one hour after its preparation time. */
let withMaxRecordTime = '';
let maxRecordTimeIso = '';

function ensureBuilt(): void {
  const main = join(ROOT, 'dist', 'cli', 'main.js');
  const newest = (d: string): number => {
    let t = 0;
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
    }
    return t;
  };
  let stale = true;
  try {
    stale = statSync(main).mtimeMs < newest(join(ROOT, 'src'));
  } catch {
    stale = true;
  }
  if (stale)
    execFileSync(
      process.execPath,
      [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
      {
        cwd: ROOT,
        stdio: 'pipe',
      },
    );
}

beforeAll(() => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'canton-signer-cli-'));
  const model = decodePreparedTransaction(bytesOf(PING.v));
  const mrt = model.metadata.preparationTime + 3_600_000_000n;
  const bytes = encodePreparedTransaction({
    transaction: model.transaction,
    metadata: { ...model.metadata, maxRecordTime: mrt },
  });
  withMaxRecordTime = tmp('max-record-time.bin', bytes);
  maxRecordTimeIso = `${new Date(Number(mrt / 1000n)).toISOString().slice(0, -1)}${(mrt % 1000n).toString().padStart(3, '0')}Z`;
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// ---- hash: every real vector -------------------------------------------------------

describe.concurrent('hash: every real vector, JSON file auto-detected', () => {
  it('the real folder holds the 26 vectors', () => {
    expect(real.length).toBe(26);
  });

  for (const { file, path, v } of real) {
    it(`${file}: V2 (default) = expected_hash_hex, V3 = reference_v3_hex`, async () => {
      expect(v.expected_hash_hex).toMatch(HEX64);
      expect(v.reference_v3_hex).toMatch(HEX64);
      expectHash(await cli(['hash', path]), v.expected_hash_hex);
      expectHash(await cli(['hash', '--scheme', 'v2', path]), v.expected_hash_hex);
      expectHash(await cli(['hash', '--scheme', 'v3', path]), v.reference_v3_hex);
    });
  }
});

describe.concurrent('hash: input forms', () => {
  const { v } = PING;
  const raw = bytesOf(v);

  it('base64 on stdin without a FILE argument', async () => {
    expectHash(await cli(['hash'], v.prepared_transaction_base64), v.expected_hash_hex);
  });

  it('base64 on stdin with "-", surrounded by whitespace', async () => {
    expectHash(await cli(['hash', '-'], `\n  ${v.prepared_transaction_base64}\r\n\n`), v.expected_hash_hex);
  });

  it('base64 on stdin under V3', async () => {
    expectHash(await cli(['hash', '--scheme', 'v3', '-'], v.prepared_transaction_base64), v.reference_v3_hex);
  });

  it('raw protobuf bytes from a file', async () => {
    expectHash(await cli(['hash', tmp('ping.bin', raw)]), v.expected_hash_hex);
  });

  it('raw protobuf bytes on stdin with "-"', async () => {
    expectHash(await cli(['hash', '-'], raw), v.expected_hash_hex);
  });

  it('base64 text file', async () => {
    const f = tmp('ping.b64', `${v.prepared_transaction_base64}\n`);
    expectHash(await cli(['hash', f]), v.expected_hash_hex);
  });

  it('the vector JSON on stdin', async () => {
    expectHash(await cli(['hash'], readFileSync(PING.path)), v.expected_hash_hex);
  });

  it('a Ledger API prepare response (preparedTransaction) with --expect its own preparedTransactionHash', async () => {
    const response = JSON.stringify({
      preparedTransaction: v.prepared_transaction_base64,
      preparedTransactionHash: v.expected_hash_base64,
      hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
    });
    expectHash(
      await cli(['hash', '--expect', v.expected_hash_base64], `  \n${response}`),
      v.expected_hash_hex,
    );
  });

  it('JSON with prepared_transaction or transaction (validator style)', async () => {
    for (const key of ['prepared_transaction', 'transaction'])
      expectHash(
        await cli(['hash'], JSON.stringify({ [key]: v.prepared_transaction_base64 })),
        v.expected_hash_hex,
      );
  });

  it('preparedTransaction wins over the other JSON keys', async () => {
    const doc = JSON.stringify({
      transaction: TRANSFER.v.prepared_transaction_base64,
      preparedTransaction: v.prepared_transaction_base64,
    });
    expectHash(await cli(['hash'], doc), v.expected_hash_hex);
  });

  it('--input forces the format', async () => {
    expectHash(await cli(['hash', '--input', 'json', PING.path]), v.expected_hash_hex);
    expectHash(await cli(['hash', '--input', 'base64'], v.prepared_transaction_base64), v.expected_hash_hex);
    expectHash(await cli(['hash', '--input', 'raw'], raw), v.expected_hash_hex);
    // the vector file read as base64 text: braces and quotes are not base64
    expectRefused(await cli(['hash', '--input', 'base64', PING.path]), 'bad_encoding', '');
    // base64 text read as raw protobuf bytes is not a PreparedTransaction
    const line = expectFailure(await cli(['hash', '--input', 'raw'], v.prepared_transaction_base64), 2);
    expect(line).toMatch(/^canton-signer: refused: /);
  });

  it('an unknown --input format is a usage error', async () => {
    const line = expectFailure(await cli(['hash', '--input', 'hex'], v.prepared_transaction_base64), 2);
    expect(line).toContain('hex');
  });
});

// ---- hash --expect -----------------------------------------------------------------

describe.concurrent('hash --expect', () => {
  const { path, v } = TRANSFER;

  it('hex match: exit 0, the hash on stdout', async () => {
    expectHash(await cli(['hash', '--expect', v.expected_hash_hex, path]), v.expected_hash_hex);
  });

  it('upper-case hex match: exit 0', async () => {
    expectHash(await cli(['hash', '--expect', v.expected_hash_hex.toUpperCase(), path]), v.expected_hash_hex);
  });

  it('base64 match: exit 0', async () => {
    expect(Buffer.from(v.expected_hash_base64, 'base64').toString('hex')).toBe(v.expected_hash_hex);
    expectHash(await cli(['hash', '--expect', v.expected_hash_base64, path]), v.expected_hash_hex);
  });

  it('V3 against the V3 reference: exit 0', async () => {
    expectHash(
      await cli(['hash', '--scheme', 'v3', '--expect', v.reference_v3_hex, path]),
      v.reference_v3_hex,
    );
  });

  it('mismatch (the V3 hash expected under V2): exit 1, one stderr line with both hashes, empty stdout', async () => {
    const line = expectFailure(await cli(['hash', '--expect', v.reference_v3_hex, path]), 1);
    expect(line).toMatch(/^canton-signer: hash mismatch: /);
    expect(line).toContain(v.expected_hash_hex);
    expect(line).toContain(v.reference_v3_hex);
  });

  it('mismatch given as base64: exit 1', async () => {
    const other = Buffer.from(v.reference_v3_hex, 'hex').toString('base64');
    const line = expectFailure(await cli(['hash', '--expect', other, path]), 1);
    expect(line).toContain(v.reference_v3_hex);
  });

  it('an --expect that is not a 32-byte hash is a usage error (exit 2)', async () => {
    for (const bad of ['abc', v.expected_hash_hex.slice(2), `${v.expected_hash_hex}00`, 'not a hash!']) {
      const line = expectFailure(await cli(['hash', '--expect', bad, path]), 2);
      expect(line).toMatch(/^canton-signer: --expect /);
    }
    // hex of the wrong length, or with 0x: the hex form named, not base64's rules
    const short = expectFailure(await cli(['hash', '--expect', v.expected_hash_hex.slice(1), path]), 2);
    expect(short).toContain(
      '--expect must be 64 hex characters or 44 base64 characters (32 bytes): this is 63 hex characters',
    );
    const prefixed = expectFailure(await cli(['hash', '--expect', `0x${v.expected_hash_hex}`, path]), 2);
    expect(prefixed).toContain('drop the 0x prefix');
  });
});

describe.concurrent('the negative vector', () => {
  const bytes = new Uint8Array(Buffer.from(negative.prepared_transaction_base64, 'base64'));

  it('hashes to the reference, which differs from its published hash in the last byte', async () => {
    expect(negative.reference_check.reference_v2_hex).not.toBe(negative.expected_hash_hex);
    expectHash(await cli(['hash', NEGATIVE_PATH]), negative.reference_check.reference_v2_hex);
    expectHash(await cli(['hash', '--scheme', 'v3', '-'], bytes), negative.reference_check.reference_v3_hex);
  });

  it('--expect with its hex hash fails with exit 1', async () => {
    const line = expectFailure(await cli(['hash', '--expect', negative.expected_hash_hex, NEGATIVE_PATH]), 1);
    expect(line).toBe(
      `canton-signer: hash mismatch: computed ${negative.reference_check.reference_v2_hex} (V2), expected ${negative.expected_hash_hex}`,
    );
  });

  it('its base64 hash is non-canonical base64: --expect refuses it as a usage error (exit 2), before hashing', async () => {
    // 'APe=' ends in a character whose two unused low bits are not zero: a lenient
    // decoder reads the same 32 bytes as the hex form, and so does 'APc=', so two
    // texts would mean one hash. The strict reader refuses the text itself.
    const lenient = Buffer.from(negative.expected_hash_base64, 'base64');
    expect(lenient.toString('hex')).toBe(negative.expected_hash_hex);
    expect(lenient.toString('base64')).not.toBe(negative.expected_hash_base64);
    const line = expectFailure(
      await cli(['hash', '--expect', negative.expected_hash_base64, NEGATIVE_PATH]),
      2,
    );
    expect(line).toBe('canton-signer: --expect is not canonical base64 (non-zero padding bits)');
    // the canonical spelling of the same 32 bytes is accepted, and then mismatches (exit 1)
    const canonical = expectFailure(
      await cli(['hash', '--expect', lenient.toString('base64'), NEGATIVE_PATH]),
      1,
    );
    expect(canonical).toContain(negative.expected_hash_hex);
  });
});

// ---- refusals and usage errors --------------------------------------------------------

describe.concurrent('refused input: exit 2, empty stdout, one stderr line with the code and the path', () => {
  const raw = bytesOf(PING.v);

  it('truncated bytes', async () => {
    const line = expectRefused(
      await cli(['hash', tmp('truncated.bin', raw.subarray(0, raw.length - 5))]),
      'truncated',
      'metadata',
    );
    expect(line).toContain('runs past the end');
  });

  it('truncated bytes, base64 on stdin', async () => {
    expectRefused(await cli(['hash'], b64(raw.subarray(0, raw.length - 5))), 'truncated', 'metadata');
  });

  it('garbage base64 (base64 characters, wrong length)', async () => {
    const line = expectRefused(await cli(['hash'], 'abcde\n'), 'bad_encoding', '');
    expect(line).toContain('input is not standard padded base64');
  });

  it('base64 with a stray character inside', async () => {
    const s = PING.v.prepared_transaction_base64;
    const line = expectRefused(
      await cli(['hash'], JSON.stringify({ preparedTransaction: `${s.slice(0, 40)}*${s.slice(41)}` })),
      'bad_encoding',
      '',
    );
    expect(line).toContain('JSON field preparedTransaction');
  });

  it('line-wrapped base64 (as `base64` prints it by default) is read as the same bytes', async () => {
    const wrapped = (b64(raw).match(/.{1,76}/g) ?? []).join('\n');
    expect(wrapped).toContain('\n');
    expectHash(await cli(['hash'], `${wrapped}\n`), PING.v.expected_hash_hex);
  });

  it('line breaks inside base64 still cannot hide invalid characters', async () => {
    const wrapped = (b64(raw).match(/.{1,76}/g) ?? []).join('\n*');
    expectRefused(await cli(['hash', '--input', 'base64'], `${wrapped}\n`), 'bad_encoding', '');
  });

  it('JSON that does not parse', async () => {
    const line = expectRefused(await cli(['hash'], '{ "preparedTransaction": '), 'bad_encoding', '');
    expect(line).toContain('not valid JSON');
  });

  it('JSON without a prepared transaction field', async () => {
    const line = expectRefused(await cli(['hash'], '{"hash": "abc"}'), 'bad_encoding', '');
    expect(line).toContain('preparedTransaction');
  });

  it('an unknown field in metadata.submitter_info', async () => {
    const f = tmp('unknown-submitter.bin', appendInside(raw, [2, 2], UNKNOWN_FIELD));
    const line = expectRefused(await cli(['hash', f]), 'unknown_field', 'metadata.submitter_info');
    expect(line).toContain('99');
  });

  it('an unknown field inside a node argument record field, base64 on stdin', async () => {
    const bytes = appendInside(raw, [1, 3, 1000, 1, 5, 14, 2], UNKNOWN_FIELD);
    expectRefused(
      await cli(['hash', '--scheme', 'v3'], b64(bytes)),
      'unknown_field',
      'transaction.nodes[0].v1.create.argument.record.fields[0]',
    );
  });

  it('inspect refuses the same inputs the same way', async () => {
    const f = tmp('unknown-node.bin', appendInside(raw, [1, 3, 1000, 1], UNKNOWN_FIELD));
    expectRefused(await cli(['inspect', f]), 'unknown_field', 'transaction.nodes[0].v1.create');
    expectRefused(await cli(['inspect', '--json', f]), 'unknown_field', 'transaction.nodes[0].v1.create');
    expectRefused(await cli(['inspect', '-'], raw.subarray(0, raw.length - 5)), 'truncated', 'metadata');
  });

  it('--require-signed-max-record-time under V2: not_covered, even when a max_record_time is present', async () => {
    for (const f of [PING.path, withMaxRecordTime]) {
      const line = expectRefused(
        await cli(['hash', '--require-signed-max-record-time', f]),
        'not_covered',
        'metadata.max_record_time',
      );
      expect(line).toContain('V3');
    }
  });

  it('--require-signed-max-record-time under V3 is satisfied', async () => {
    expectHash(
      await cli(['hash', '--scheme', 'v3', '--require-signed-max-record-time', PING.path]),
      PING.v.reference_v3_hex,
    );
    const r = await cli(['hash', '--scheme', 'v3', '--require-signed-max-record-time', withMaxRecordTime]);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^[0-9a-f]{64}\n$/);
  });
});

describe.concurrent('input that is not a prepared transaction: one sentence saying what it seems to be, exit 2', () => {
  /** The `refused: bad_encoding:` line, without protobuf jargon, that says what is expected. */
  const expectNotATransaction = (r: Run): string => {
    const line = expectRefused(r, 'bad_encoding', '');
    expect(line).toContain('give a prepared transaction as base64 text, as raw protobuf bytes, or as JSON');
    for (const jargon of ['wire type', 'field number', 'missing_field', 'at byte'])
      expect(line).not.toContain(jargon);
    return line;
  };
  const PNG = Uint8Array.from([
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 5, 1,
  ]);

  it('a text file (a README): text, neither base64 nor JSON', async () => {
    const f = tmp('README.md', '# canton-signer\n\nA self-hosted signer.\n');
    for (const cmd of ['hash', 'inspect']) {
      const line = expectNotATransaction(await cli([cmd, f]));
      expect(line).toContain(`${f} is text, neither base64 nor JSON, not a prepared transaction`);
    }
  });

  it('a text file starting with a line break (byte 0x0a, as a transaction starts) is still text', async () => {
    const line = expectNotATransaction(
      await cli(['hash', tmp('notes.txt', '\nnotes: hash before signing\n')]),
    );
    expect(line).toContain('is text');
  });

  it('an image, a PDF, a ZIP archive: named as such, also when given as base64', async () => {
    const cases: [string, Uint8Array, string][] = [
      ['some.png', PNG, 'a PNG image'],
      ['doc.pdf', new TextEncoder().encode('%PDF-1.7\n%\xe2\xe3\n1 0 obj'), 'a PDF document'],
      ['pkg.dar', Uint8Array.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0, 0, 0, 8, 0]), 'a ZIP archive'],
    ];
    for (const [name, bytes, what] of cases) {
      const f = tmp(name, bytes);
      expect(expectNotATransaction(await cli(['hash', f]))).toContain(`${f} is ${what}`);
      expect(expectNotATransaction(await cli(['inspect', '-'], b64(bytes)))).toContain(
        `the base64 text of standard input decodes to ${what}`,
      );
    }
  });

  it('other binary data that cannot start a PreparedTransaction: the sentence, then the decoder detail', async () => {
    const line = expectRefused(
      await cli(['hash', tmp('data.bin', Uint8Array.from([0x00, 0x01, 0xfe, 0x80, 0x02]))]),
      'bad_encoding',
      '',
    );
    expect(line).toContain('is binary data that does not start as a PreparedTransaction does');
    expect(line).toContain('(the decoder: ');
  });

  it("a real transaction that is merely malformed keeps the decoder's precise refusal", async () => {
    const raw = bytesOf(PING.v);
    expectRefused(
      await cli(['hash', tmp('cut.bin', raw.subarray(0, raw.length - 5))]),
      'truncated',
      'metadata',
    );
  });

  it('an air-gap request: says what it is and that offline verify / offline sign take it', async () => {
    const request = tmp(
      'request.json',
      JSON.stringify({
        request: {
          format: 'canton-signer/air-gap-request@1',
          kind: 'prepared-transaction',
          preparedTransaction: PING.v.prepared_transaction_base64,
        },
        digest: '00'.repeat(32),
      }),
    );
    for (const cmd of ['hash', 'inspect']) {
      const line = expectRefused(await cli([cmd, request]), 'bad_encoding', '');
      expect(line).toContain(`${request} is a canton-signer air-gap request, not a prepared transaction`);
      expect(line).toContain(`canton-signer offline verify ${request}`);
      expect(line).not.toContain('none of the fields');
    }
  });

  it('an air-gap response: says that import takes it', async () => {
    const response = tmp(
      'response.json',
      JSON.stringify({ format: 'canton-signer/air-gap-response@1', nonce: '11'.repeat(32) }),
    );
    const line = expectRefused(await cli(['inspect', response]), 'bad_encoding', '');
    expect(line).toContain(`${response} is a canton-signer air-gap response, not a prepared transaction`);
    expect(line).toContain(`canton-signer import ${response}`);
  });

  it('the JSON report of inspect --json given back to hash', async () => {
    const report = await cli(['inspect', '--json', PING.path]);
    expect(report.status).toBe(0);
    const line = expectRefused(await cli(['hash', tmp('report.json', report.stdout)]), 'bad_encoding', '');
    expect(line).toContain('is a report of `canton-signer inspect --json`, not a prepared transaction');
  });
});

describe.concurrent('usage errors: exit 2, empty stdout, one stderr line', () => {
  it('an invalid --scheme', async () => {
    for (const cmd of ['hash', 'inspect']) {
      const line = expectFailure(await cli([cmd, '--scheme', 'v4', PING.path]), 2);
      expect(line).toContain("'v4'");
      expect(line).toContain('v2, v3');
    }
  });

  it('a missing file', async () => {
    const missing = join(dir, 'does-not-exist.b64');
    for (const cmd of ['hash', 'inspect']) {
      const line = expectFailure(await cli([cmd, missing]), 2);
      expect(line).toBe(`canton-signer: cannot read ${missing}: no such file`);
    }
  });

  it('a directory instead of a file: one sentence with the path and what to give instead', async () => {
    const d = join(dir, 'a-directory');
    mkdirSync(d, { recursive: true });
    for (const cmd of ['hash', 'inspect']) {
      const line = expectFailure(await cli([cmd, d]), 2);
      expect(line).toBe(
        `canton-signer: cannot read ${d}: it is a directory, not a file; give the path of a file, or "-" to read standard input`,
      );
      expect(line).not.toContain('EISDIR');
    }
  });

  it('empty input, also when it holds only whitespace: "the input is empty"', async () => {
    for (const cmd of ['hash', 'inspect']) {
      const line = expectFailure(await cli([cmd], ''), 2);
      expect(line).toMatch(
        /^canton-signer: the input is empty \(standard input holds nothing\): give a prepared transaction /,
      );
      const blank = expectFailure(await cli([cmd, tmp('blank.txt', ' \n\r\n\t\n')]), 2);
      expect(blank).toMatch(/^canton-signer: the input is empty \(.*blank\.txt holds only whitespace\): /);
      expect(blank).not.toContain('missing_field');
    }
  });

  it('an unknown option, an unknown command, an extra argument', async () => {
    expect(expectFailure(await cli(['hash', '--bogus', PING.path]), 2)).toContain('--bogus');
    expect(expectFailure(await cli(['frobnicate']), 2)).toContain('frobnicate');
    expectFailure(await cli(['hash', PING.path, PING.path]), 2);
  });
});

describe.concurrent('help and version', () => {
  it('--help exits 0 and lists hash and inspect', async () => {
    const r = await cli(['--help']);
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^\s+hash\b/m);
    expect(r.stdout).toMatch(/^\s+inspect\b/m);
  });

  it('hash --help and inspect --help list their options', async () => {
    const h = await cli(['hash', '--help']);
    expect(h.status).toBe(0);
    for (const o of ['--scheme', '--expect', '--require-signed-max-record-time', '--input'])
      expect(h.stdout).toContain(o);
    const i = await cli(['inspect', '--help']);
    expect(i.status).toBe(0);
    for (const o of ['--scheme', '--json', '--input']) expect(i.stdout).toContain(o);
  });

  it('--version prints the package version', async () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const r = await cli(['--version']);
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`${pkg.version}\n`);
  });
});

// ---- inspect (text) -------------------------------------------------------------------

describe.concurrent('inspect (text)', () => {
  it('token transfer: templates, choices, parties, amounts, instrument, deadline, metadata, hash', async () => {
    const r = await cli(['inspect', TRANSFER.path]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = r.stdout;
    const tx = decodePreparedTransaction(bytesOf(TRANSFER.v));
    for (const n of tx.nodeById.values()) {
      expect(out).toContain(templateOf(n));
      if (n.type === 'exercise') expect(out).toContain(` choice ${n.choiceId} `);
      if (n.type === 'create' || n.type === 'exercise')
        expect(out).toContain(`signatories: ${n.signatories.join(', ')}`);
      if (n.type === 'exercise' || n.type === 'fetch') expect(out).toContain(n.actingParties.join(', '));
    }
    expect(out).toContain(
      ' CREATE utility-registry-app-v0:Utility.Registry.App.V0.Model.Transfer:TransferOffer',
    );
    expect(out).toContain(
      ' EXERCISE utility-registry-app-v0:Utility.Registry.App.V0.Service.AllocationFactory:AllocationFactory choice TransferFactory_Transfer (non-consuming)',
    );
    expect(out).toContain(' choice Archive (consuming)');
    expect(out).toContain('amount transfer.amount = 1.0000000000');
    expect(out).toContain('amount amount = 478.0000000000');
    expect(out).toMatch(/party transfer\.receiver = 1220a::1220af7eb9/);
    expect(out).toMatch(
      /instrument transfer\.instrumentId = TestToken \(admin auth0_007c65f857f1c3d599cb6df73775::/,
    );
    expect(out).toContain('time transfer.executeBefore = 2026-02-04T09:00:32.658000Z');

    const m = tx.metadata;
    const lines = out.split('\n');
    expect(lines).toContain(`  act as:            ${m.submitterInfo.actAs.join(', ')}`);
    expect(lines).toContain(`  command id:        ${m.submitterInfo.commandId}`);
    expect(lines).toContain(`  synchronizer:      ${m.synchronizerId}`);
    expect(lines).toContain(`  transaction uuid:  ${m.transactionUuid}`);
    expect(lines).toContain('  preparation time:  2026-02-04T08:00:33.708533Z');
    expect(lines).toContain(
      '  ledger time:       2026-02-04T08:00:32.658000Z .. 2026-02-04T09:00:32.657999Z',
    );
    expect(lines).toContain('  max record time:   (none) — NOT covered by the V2 hash');
    expect(lines).toContain(`  input contracts:   ${m.inputContracts.length}`);
    expect(m.inputContracts.length).toBe(3);
    expect(out.endsWith(`\nHash (V2): ${TRANSFER.v.expected_hash_hex}\n`)).toBe(true);
  });

  it('under V3: "covered by the V3 hash" and the V3 hash last', async () => {
    const r = await cli(['inspect', '--scheme', 'v3', TRANSFER.path]);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('  max record time:   (none) — covered by the V3 hash\n');
    expect(r.stdout).not.toContain('NOT covered');
    expect(r.stdout.endsWith(`\nHash (V3): ${TRANSFER.v.reference_v3_hex}\n`)).toBe(true);
  });

  it('a max_record_time under V2 is shown with a warning; under V3 it is covered', async () => {
    const v2 = await cli(['inspect', withMaxRecordTime]);
    expect(v2.status).toBe(0);
    expect(v2.stdout).toContain(`  max record time:   ${maxRecordTimeIso} — NOT covered by the V2 hash\n`);
    expect(v2.stdout).toMatch(/^WARNING: max_record_time is NOT covered by the V2 hash/m);
    const v3 = await cli(['inspect', '--scheme', 'v3', withMaxRecordTime]);
    expect(v3.status).toBe(0);
    expect(v3.stdout).toContain(`  max record time:   ${maxRecordTimeIso} — covered by the V3 hash\n`);
    expect(v3.stdout).not.toMatch(/^WARNING: .*max_record_time/m);
    const hash = await cli(['hash', '--scheme', 'v3', withMaxRecordTime]);
    expect(v3.stdout.endsWith(`\nHash (V3): ${hash.stdout}`)).toBe(true);
  });

  for (const { file, path, v } of real) {
    it(`${file}: every node's template and choice, then the V2 hash as the last line`, async () => {
      const r = await cli(['inspect', path]);
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      const tx = decodePreparedTransaction(bytesOf(v));
      const order = preOrder(tx);
      // node headers appear in pre-order
      let at = -1;
      for (const { id } of order) {
        const n = tx.nodeById.get(id)!;
        const header = `[${id}] ${n.type.toUpperCase()}${n.type === 'rollback' ? '' : ` ${templateOf(n)}`}`;
        const pos = r.stdout.indexOf(header);
        expect(pos, header).toBeGreaterThan(at);
        at = pos;
        if (n.type === 'exercise') expect(r.stdout).toContain(` choice ${n.choiceId} `);
      }
      expect(r.stdout).toContain('\nMetadata\n');
      expect(r.stdout).toContain('NOT covered by the V2 hash');
      expect(r.stdout.endsWith(`\nHash (V2): ${v.expected_hash_hex}\n`)).toBe(true);
    });
  }
});

// ---- inspect --json -------------------------------------------------------------------

interface JsonNode {
  nodeId: string;
  parent: string | null;
  depth: number;
  type: string;
  nodeHash: string;
  template?: string;
  choice?: string;
  children?: string[];
}

interface JsonReport {
  format: string;
  scheme: string;
  hash: string;
  maxRecordTimeCovered: boolean;
  warnings: string[];
  transaction: { version: string; roots: string[]; nodeCount: number; nodes: JsonNode[] };
  metadata: { commandId: string; maxRecordTime: string | null; inputContracts: unknown[] };
}

function checkTree(report: JsonReport, tx: DecodedTransaction): void {
  const nodes = report.transaction.nodes;
  const expected = preOrder(tx);
  // every node of the transaction is reachable (the decoder refuses orphans), each exactly once
  expect(expected.length).toBe(tx.transaction.nodes.length);
  expect(report.transaction.nodeCount).toBe(expected.length);
  expect(nodes.length).toBe(expected.length);
  expect(report.transaction.roots).toEqual(tx.transaction.roots);
  expect(nodes.map((n) => n.nodeId)).toEqual(expected.map((e) => e.id));

  // parent before child, depth = parent depth + 1, parent = nearest earlier node one level up
  const seen = new Map<string, JsonNode>();
  const stack: JsonNode[] = [];
  for (const n of nodes) {
    while (stack.length > n.depth) stack.pop();
    if (n.parent === null) {
      expect(n.depth).toBe(0);
      expect(report.transaction.roots).toContain(n.nodeId);
    } else {
      const p = seen.get(n.parent);
      expect(p, `parent of ${n.nodeId} listed before it`).toBeDefined();
      expect(n.depth).toBe(p!.depth + 1);
      expect(stack[stack.length - 1]).toBe(p);
      expect(p!.children).toContain(n.nodeId);
    }
    const body = tx.nodeById.get(n.nodeId)!;
    expect(n.type).toBe(body.type);
    expect(n.nodeHash).toMatch(HEX64);
    if (body.type === 'exercise' || body.type === 'rollback') expect(n.children).toEqual(body.children);
    if (body.type === 'exercise') expect(n.choice).toBe(body.choiceId);
    if (body.type !== 'rollback') expect(n.template).toBe(templateOf(body));
    seen.set(n.nodeId, n);
    stack.push(n);
  }
}

describe.concurrent('inspect --json', () => {
  for (const { file, path, v } of real) {
    it(`${file}: format, hash, node count, pre-order tree`, async () => {
      const r = await cli(['inspect', '--json', path]);
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      expect(r.stdout.endsWith('}\n')).toBe(true);
      const report = JSON.parse(r.stdout) as JsonReport;
      expect(report.format).toBe('canton-signer/inspect@1');
      expect(report.scheme).toBe('v2');
      expect(report.hash).toBe(v.expected_hash_hex);
      expect(report.maxRecordTimeCovered).toBe(false);
      const tx = decodePreparedTransaction(bytesOf(v));
      expect(report.metadata.commandId).toBe(tx.metadata.submitterInfo.commandId);
      expect(report.metadata.inputContracts.length).toBe(tx.metadata.inputContracts.length);
      checkTree(report, tx);
    });
  }

  it('under V3: the V3 hash and maxRecordTimeCovered', async () => {
    for (const { path, v } of [PING, TRANSFER]) {
      const r = await cli(['inspect', '--json', '--scheme', 'v3', path]);
      expect(r.status).toBe(0);
      const report = JSON.parse(r.stdout) as JsonReport;
      expect(report.scheme).toBe('v3');
      expect(report.hash).toBe(v.reference_v3_hex);
      expect(report.maxRecordTimeCovered).toBe(true);
    }
  });

  it('max_record_time in the document, with the V2 warning', async () => {
    const r = await cli(['inspect', '--json', withMaxRecordTime]);
    expect(r.status).toBe(0);
    const report = JSON.parse(r.stdout) as JsonReport;
    expect(report.metadata.maxRecordTime).toBe(maxRecordTimeIso);
    expect(report.maxRecordTimeCovered).toBe(false);
    expect(report.warnings.some((w) => w.includes('max_record_time') && w.includes('NOT covered'))).toBe(
      true,
    );
  });

  it('the same document from base64 on stdin as from the JSON file', async () => {
    const a = await cli(['inspect', '--json', TRANSFER.path]);
    const b = await cli(['inspect', '--json', '-'], TRANSFER.v.prepared_transaction_base64);
    expect(b.status).toBe(0);
    expect(b.stdout).toBe(a.stdout);
  });
});

// ---- a pipeline refusal under --json -----------------------------------------------------

describe.concurrent('a pipeline refusal: exit 1, one stderr line, and with --json one JSON object on stdout', () => {
  /** A keystore folder whose party book holds the ping's acting party (no key: the refusals come first). */
  const setUp = (name: string) => {
    const model = decodePreparedTransaction(bytesOf(PING.v));
    const partyId = model.metadata.submitterInfo.actAs[0] as string;
    const keystore = join(dir, name);
    mkdirSync(keystore);
    writeFileSync(
      join(keystore, 'parties.json'),
      JSON.stringify({
        format: 'canton-signer/parties@1',
        parties: [
          {
            partyId,
            hint: 'ping',
            keyLabel: 'ping',
            scheme: 'ed25519',
            fingerprint: partyId.split('::')[1],
            publicKeySpki: 'MCowBQYDK2VwAyEA',
            via: 'ledger-api',
            createdAt: '2025-01-01T00:00:00Z',
          },
        ],
      }),
    );
    const intent = tmp(
      `${name}-intent.json`,
      JSON.stringify({ kind: 'create', party: partyId, template: 'not-the-package:Not.The:Template' }),
    );
    const prepared = (hash: string) =>
      tmp(
        `${name}-prepared-${hash.slice(0, 8)}.json`,
        JSON.stringify({
          preparedTransaction: PING.v.prepared_transaction_base64,
          preparedTransactionHash: hash,
          hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
        }),
      );
    const args = (hash: string) => [
      'sign-and-execute',
      '--keystore',
      keystore,
      '--party',
      partyId,
      '--intent',
      intent,
      '--prepared',
      prepared(hash),
      '--verify-only',
    ];
    return { args };
  };

  it('without --json: stdout empty, the reason and sentence on stderr', async () => {
    const { args } = setUp('refusal-text');
    const r = await cli(args(PING.v.expected_hash_base64));
    const line = expectFailure(r, 1);
    expect(line).toMatch(/^canton-signer: refused \(intent_mismatch\): \S/);
  });

  it('with --json: reason, message and each problem on stdout; the same line on stderr', async () => {
    const { args } = setUp('refusal-json');
    const r = await cli([...args(PING.v.expected_hash_base64), '--json']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^canton-signer: refused \(intent_mismatch\): [^\n]+\n$/);
    const v = JSON.parse(r.stdout) as {
      reason: string;
      message: string;
      problems?: { reason: string; message: string }[];
    };
    expect(v.reason).toBe('intent_mismatch');
    expect(r.stderr).toContain(v.message.split('\n')[0] as string);
    expect(v.problems?.length).toBeGreaterThan(0);
    for (const p of v.problems ?? []) expect(typeof p.message).toBe('string');
  });

  it('with --json, a refusal without problems leaves `problems` out and carries its details', async () => {
    const { args } = setUp('refusal-details');
    const wrong = Buffer.alloc(32, 7).toString('base64');
    const r = await cli([...args(wrong), '--json']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^canton-signer: refused \(hash_mismatch\): [^\n]+\n$/);
    const v = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(v.reason).toBe('hash_mismatch');
    expect(typeof v.message).toBe('string');
    expect(v).not.toHaveProperty('problems');
    expect(v.details).toEqual({
      claimed: '07'.repeat(32),
      computed: PING.v.expected_hash_hex,
      scheme: 'v2',
    });
  });
});

describe('the command table: a command line naming a command loads only its module', () => {
  it('each entry registers exactly the commands it names, and together they are every command', async () => {
    const { buildProgram, COMMAND_MODULES } = await import('../src/cli/main.js');
    const names = (p: { commands: readonly { name(): string }[] }) => p.commands.map((c) => c.name());
    const all = names(await buildProgram([]));
    expect(all).toEqual(COMMAND_MODULES.flatMap(([n]) => n));
    expect(all).toContain('hash');
    for (const [entry] of COMMAND_MODULES)
      for (const name of entry)
        expect(names(await buildProgram(['node', 'canton-signer', name]))).toEqual(entry);
    // anything else (an option, help, an unknown word) gets every command, for the help and "did you mean"
    for (const first of ['--help', 'help', 'hsah', undefined])
      expect(names(await buildProgram(['node', 'canton-signer', ...(first ? [first] : [])]))).toEqual(all);
  });
});
