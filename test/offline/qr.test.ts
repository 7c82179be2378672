/**
 * QR transport (src/offline/qr.ts, src/offline/qr-frames.ts): framing round trips and every refusal, PNG sheet
 * round trip of a real ~25 KB prepared-transaction payload, terminal frames decoded back, animate(), HTML page.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import fc from 'fast-check';
import { PNG } from 'pngjs';
import QRCode from 'qrcode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ANSI_HOME_CLEAR,
  animate,
  base45Decode,
  base45Encode,
  DEFAULT_TERMINAL_CHUNK_BYTES,
  decodeFrames,
  decodeQrImage,
  encodeFrames,
  FrameCollector,
  formatFrame,
  parseFrame,
  payloadDigest,
  type QrErrorCode,
  QrTransportError,
  readQrPngs,
  renderHtmlAnimation,
  renderTerminalFrames,
  writeQrPngs,
} from '../../src/offline/qr.js';
import { VECTORS_DIR } from '../support/vectors.js';

let payload = ''; // ~26 KB: JSON with a real prepared transaction in base64
let small = ''; // ~2 KB: a few frames
let tmp = '';

beforeAll(async () => {
  const vector = JSON.parse(
    await readFile(join(VECTORS_DIR, 'real', 'v2_bitgo_cantontokentransferprepareresponse.json'), 'utf8'),
  ) as { prepared_transaction_base64: string; expected_hash_hex: string };
  payload = JSON.stringify({
    format: 'canton-signer/airgap-request',
    version: 1,
    note: 'Überweisung → 10 CC ✓',
    prepared_transaction_base64: vector.prepared_transaction_base64,
    hash_hex: vector.expected_hash_hex,
  });
  small = JSON.stringify({ prepared_transaction_base64: vector.prepared_transaction_base64.slice(0, 2000) });
  tmp = await mkdtemp(join(tmpdir(), 'canton-signer-qr-'));
});

afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

function errorOf(fn: () => unknown): QrTransportError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(QrTransportError);
    return err as QrTransportError;
  }
  throw new Error('expected a QrTransportError, nothing was thrown');
}

async function asyncErrorOf(p: Promise<unknown>): Promise<QrTransportError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(QrTransportError);
    return err as QrTransportError;
  }
  throw new Error('expected a QrTransportError, nothing was thrown');
}

function expectCode(fn: () => unknown, code: QrErrorCode, message?: RegExp): QrTransportError {
  const err = errorOf(fn);
  expect(err.code).toBe(code);
  if (message) expect(err.message).toMatch(message);
  return err;
}

function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe('base45', () => {
  it('matches the RFC 9285 examples and refuses invalid text', () => {
    const enc = (s: string) => base45Encode(Buffer.from(s, 'utf8'));
    expect(enc('AB')).toBe('BB8');
    expect(enc('Hello!!')).toBe('%69 VD92EX0');
    expect(enc('base-45')).toBe('UJCLQE7W581');
    expect(Buffer.from(base45Decode('QED8WEX0')).toString('utf8')).toBe('ietf!');
    expect(() => base45Decode('GGW')).toThrow(/exceeds 2 bytes/);
    expect(() => base45Decode('ABCD')).toThrow(/single character/);
    expect(() => base45Decode('ab')).toThrow(/not in the base45 alphabet/);
  });

  it('round trips any bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        expect(base45Decode(base45Encode(bytes))).toEqual(bytes);
      }),
    );
  });
});

describe('framing', () => {
  it('frames a real payload into self-describing alphanumeric frames of at most ~800 characters', () => {
    const frames = encodeFrames(payload);
    const digest = payloadDigest(payload);
    expect(frames.length).toBeGreaterThan(5);
    expect(frames.length).toBeLessThan(payload.length / 1000); // compression pays: raw would need 53
    frames.forEach((frame, i) => {
      expect(frame).toMatch(/^[0-9A-Z $%*+\-./:]+$/); // the QR alphanumeric set
      expect(frame.length).toBeLessThanOrEqual(800);
      expect(frame.startsWith(`CSQR1:${i + 1}/${frames.length}:${digest}:Z:`)).toBe(true);
      const parsed = parseFrame(frame);
      expect([parsed.index, parsed.total, parsed.digest, parsed.encoding]).toEqual([
        i + 1,
        frames.length,
        digest,
        'Z',
      ]);
    });
    expect(encodeFrames(payload, { compress: false }).length).toBe(
      Math.ceil(Buffer.byteLength(payload) / 500),
    );
    expect(decodeFrames(frames)).toBe(payload);
  });

  it('reassembles frames given shuffled and duplicated', () => {
    const frames = encodeFrames(payload);
    const messy = shuffled([...frames, frames[3]!, frames[0]!, ...frames.slice(5, 8)], 7);
    expect(decodeFrames(messy)).toBe(payload);
  });

  it('reports progress frame by frame and ignores identical duplicates', () => {
    const frames = encodeFrames(small, { chunkBytes: 200 });
    expect(frames.length).toBeGreaterThanOrEqual(3);
    const collector = new FrameCollector();
    expect(collector.progress()).toMatchObject({ have: 0, total: null, missing: [], complete: false });
    let p = collector.add(frames[1]!);
    expect(p).toMatchObject({ have: 1, total: frames.length, complete: false, added: true });
    expect(p.missing).toEqual([1, ...Array.from({ length: frames.length - 2 }, (_, i) => i + 3)]);
    p = collector.add(frames[1]!);
    expect(p).toMatchObject({ have: 1, added: false });
    for (const f of frames) p = collector.add(f);
    expect(p).toMatchObject({ have: frames.length, missing: [], complete: true });
    expect(collector.result()).toBe(small);
  });

  it('round trips any string, including non-ASCII, through framing (property)', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: 'binary', maxLength: 400 }),
          fc.string({ unit: 'grapheme', maxLength: 200 }),
        ),
        fc.integer({ min: 16, max: 64 }),
        fc.constantFrom<boolean | 'auto'>(true, false, 'auto'),
        fc.integer({ min: 0, max: 1000 }),
        (text, chunkBytes, compress, seed) => {
          const frames = encodeFrames(text, { chunkBytes, compress });
          expect(decodeFrames(shuffled(frames, seed))).toBe(text);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('detects any changed character in a frame (property)', () => {
    const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:';
    const frames = encodeFrames(small, { chunkBytes: 64 });
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: frames.length - 1 }),
        fc.nat(),
        fc.integer({ min: 1, max: alphabet.length - 1 }),
        (which, at, shift) => {
          const frame = frames[which]!;
          const chunkStart = frame.split(':').slice(0, 5).join(':').length + 1;
          const pos = chunkStart + (at % (frame.length - chunkStart));
          const replaced = alphabet[(alphabet.indexOf(frame[pos]!) + shift) % alphabet.length]!;
          const bad = frame.slice(0, pos) + replaced + frame.slice(pos + 1);
          const err = expectCode(() => new FrameCollector().add(bad), 'frame_corrupt', /is corrupt/);
          expect(err.index).toBe(which + 1);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('refusals', () => {
  const frames = () => encodeFrames(small, { chunkBytes: 200 });

  it('not_a_frame: another QR code, an unknown version, malformed fields', () => {
    const c = new FrameCollector();
    expectCode(() => c.add('https://example.com/x'), 'not_a_frame', /no CSQR1 prefix.*example\.com/);
    expectCode(() => c.add('CSQR2:1/1:0123456789ABCDEF:Z:01234567:AB'), 'not_a_frame', /version 2/);
    expectCode(() => c.add('CSQR1:0/3:0123456789ABCDEF:Z:01234567:AB'), 'not_a_frame', /position "0\/3"/);
    expectCode(
      () => c.add('CSQR1:4/3:0123456789ABCDEF:Z:01234567:AB'),
      'not_a_frame',
      /index 4 is beyond total 3/,
    );
    expectCode(() => c.add('CSQR1:1/3:0123456789abcdef:Z:01234567:AB'), 'not_a_frame', /digest/);
    expectCode(() => c.add('CSQR1:1/3:0123456789ABCDEF:X:01234567:AB'), 'not_a_frame', /encoding "X"/);
    expectCode(() => c.add('CSQR1:1/3'), 'not_a_frame', /fewer than 6 fields/);
    expect(c.progress().have).toBe(0);
  });

  it('frame_corrupt: a chunk that fails its own check, or a checked chunk that is not base45', () => {
    const f = frames()[1]!;
    const bad = `${f.slice(0, -1)}${f.endsWith('0') ? '1' : '0'}`;
    expect(expectCode(() => parseFrame(bad), 'frame_corrupt', /frame 2\/\d+ is corrupt/).index).toBe(2);
    // a forged frame whose check is right but whose chunk is invalid base45
    const head = `CSQR1:1/1:${payloadDigest('x')}:R:`;
    const check = createHash('sha256').update(`${head}GGW`).digest('hex').slice(0, 8).toUpperCase();
    expectCode(() => parseFrame(`${head}${check}:GGW`), 'frame_corrupt', /not valid base45/);
  });

  it('foreign_frame: a frame of another payload', () => {
    const c = new FrameCollector();
    c.add(frames()[0]!);
    const other = encodeFrames(`${small} `, { chunkBytes: 200 })[1]!;
    const err = expectCode(() => c.add(other), 'foreign_frame', /belongs to another payload/);
    expect(err.message).toContain(payloadDigest(small));
    expect(c.progress().have).toBe(1);
  });

  it('frame_conflict: a different frame claiming an index already collected', () => {
    const all = frames();
    const p = parseFrame(all[1]!);
    const forged = formatFrame({ ...p, chunk: Uint8Array.from(p.chunk, (b, i) => (i === 0 ? b ^ 1 : b)) });
    const c = new FrameCollector();
    c.add(all[1]!);
    expect(
      expectCode(() => c.add(forged), 'frame_conflict', /frame 2\/\d+ was already collected/).index,
    ).toBe(2);
  });

  it('header_mismatch: inconsistent totals (or encodings) for the same payload', () => {
    const all = frames();
    const p = parseFrame(all[0]!);
    const c = new FrameCollector();
    c.add(all[0]!);
    const wrongTotal = formatFrame({ ...p, index: 2, total: p.total + 1 });
    expectCode(
      () => c.add(wrongTotal),
      'header_mismatch',
      new RegExp(`${p.total + 1} frames, earlier.*${p.total}`),
    );
    const wrongEncoding = formatFrame({ ...p, index: 2, encoding: 'R' });
    expectCode(() => c.add(wrongEncoding), 'header_mismatch', /encoding R, earlier frames said Z/);
  });

  it('missing_frames: names the missing indexes', () => {
    const all = encodeFrames(payload);
    const c = new FrameCollector();
    for (const [i, f] of all.entries()) if (i !== 1 && i !== 4) c.add(f);
    const err = expectCode(
      () => c.result(),
      'missing_frames',
      new RegExp(`2 of ${all.length} frames are missing: 2, 5$`),
    );
    expect(err.missing).toEqual([2, 5]);
    expectCode(() => new FrameCollector().result(), 'missing_frames', /no frames were collected/);
  });

  it('digest_mismatch: consistent, well-formed frames whose reassembled payload has another digest', () => {
    const raw = encodeFrames(small, { chunkBytes: 200, compress: false });
    const p = parseFrame(raw[2]!);
    const changed = Uint8Array.from(p.chunk, (b, i) => (i === 5 ? (b === 0x41 ? 0x42 : 0x41) : b));
    const forged = [...raw];
    forged[2] = formatFrame({ ...p, chunk: changed });
    expectCode(() => decodeFrames(forged), 'digest_mismatch', /hashes to [0-9A-F]{16}, but its frames say/);
    // deflated frames: a changed chunk breaks decompression or the digest, both refused as digest_mismatch
    const z = encodeFrames(payload);
    const pz = parseFrame(z[3]!);
    const zForged = [...z];
    zForged[3] = formatFrame({
      ...pz,
      chunk: Uint8Array.from(pz.chunk, (b, i) => (i === 10 ? b ^ 0x55 : b)),
    });
    expectCode(() => decodeFrames(zForged), 'digest_mismatch');
  });

  it('payload_too_large, invalid_payload, invalid_options', () => {
    expectCode(
      () => decodeFrames(encodeFrames(payload), { maxPayloadBytes: 1000 }),
      'payload_too_large',
      /1000-byte/,
    );
    expectCode(() => encodeFrames('ok \uD800 no'), 'invalid_payload', /lone surrogate at position 3/);
    expectCode(() => encodeFrames('x', { chunkBytes: 5 }), 'invalid_options', /chunkBytes/);
  });
});

describe('PNG sheet', () => {
  it('round trips a real ~25 KB payload through PNG files, byte-equal, in any file order', async () => {
    expect(Buffer.byteLength(payload)).toBeGreaterThan(24_000);
    const dir = join(tmp, 'sheet');
    const paths = await writeQrPngs(payload, dir);
    const n = paths.length;
    expect(n).toBe(encodeFrames(payload).length);
    expect(paths.map((p) => basename(p))).toEqual(
      Array.from(
        { length: n },
        (_, i) => `frame-${String(i + 1).padStart(3, '0')}-of-${String(n).padStart(3, '0')}.png`,
      ),
    );
    const back = await readQrPngs(dir);
    expect(Buffer.from(back, 'utf8').equals(Buffer.from(payload, 'utf8'))).toBe(true);
    expect(await readQrPngs(shuffled([...paths, paths[2]!], 3))).toBe(payload);
    // refuses to write a second payload's frames over the first
    const err = await asyncErrorOf(writeQrPngs(small, dir));
    expect(err.code).toBe('output_exists');
  });

  it('reads a light-on-dark photo of a frame (inverted image)', async () => {
    const frame = encodeFrames(small, { chunkBytes: 200 })[0]!;
    const png = PNG.sync.read(await QRCode.toBuffer([{ data: frame, mode: 'alphanumeric' }], { scale: 3 }));
    for (let i = 0; i < png.data.length; i += 4) {
      for (let k = 0; k < 3; k++) png.data[i + k] = 255 - png.data[i + k]!;
    }
    expect(decodeQrImage(png.data, png.width, png.height)).toBe(frame);
    expect(decodeQrImage(png.data, png.width, png.height, 'dontInvert')).toBeNull();
  });

  it('names the PNG that holds no QR code, the one that is not a PNG, and the one with a foreign code', async () => {
    const dir = join(tmp, 'bad');
    const paths = await writeQrPngs(small, dir, { chunkBytes: 200 });
    const blank = new PNG({ width: 120, height: 120 });
    blank.data.fill(255);
    const blankPath = join(dir, 'photo-07.png');
    await writeFile(blankPath, PNG.sync.write(blank));
    let err = await asyncErrorOf(readQrPngs(dir));
    expect(err.code).toBe('no_qr_found');
    expect(err.file).toBe(blankPath);
    expect(err.message).toContain(blankPath);

    const notPng = join(tmp, 'notes.png');
    await writeFile(notPng, 'not an image');
    err = await asyncErrorOf(readQrPngs([...paths, notPng]));
    expect(err.code).toBe('unreadable_image');
    expect(err.message).toContain(notPng);

    const url = join(tmp, 'url.png');
    await QRCode.toFile(url, 'https://example.com/');
    err = await asyncErrorOf(readQrPngs([paths[0]!, url]));
    expect(err.code).toBe('not_a_frame');
    expect(err.file).toBe(url);
    expect(err.message).toMatch(/url\.png: not a canton-signer QR frame/);

    err = await asyncErrorOf(readQrPngs([paths[0]!]));
    expect(err.code).toBe('missing_frames');
    expect(err.missing).toEqual(Array.from({ length: paths.length - 1 }, (_, i) => i + 2));

    err = await asyncErrorOf(readQrPngs(join(tmp, 'does-not-exist')));
    expect(err.code).toBe('unreadable_image');
    const empty = join(tmp, 'empty');
    await writeQrPngs('', empty); // one frame for the empty payload
    expect(await readQrPngs(empty)).toBe('');
    await rm(join(empty, 'frame-001-of-001.png'));
    expect((await asyncErrorOf(readQrPngs(empty))).code).toBe('no_images');
  });
});

/** Turns a plain (ansi: false) half-block rendering back into an RGBA image. */
function terminalToImage(text: string, scale = 4): { data: Uint8Array; width: number; height: number } {
  const rows = text.split('\n').map((line) => [...line]);
  const width = rows[0]!.length * scale;
  const height = rows.length * 2 * scale;
  const data = new Uint8Array(width * height * 4).fill(255);
  rows.forEach((chars, r) => {
    expect(chars.length * scale).toBe(width);
    chars.forEach((ch, x) => {
      const halves = [ch === '█' || ch === '▀', ch === '█' || ch === '▄'];
      halves.forEach((dark, h) => {
        if (!dark) return;
        for (let dy = 0; dy < scale; dy++) {
          for (let dx = 0; dx < scale; dx++) {
            const o = (((r * 2 + h) * scale + dy) * width + x * scale + dx) * 4;
            data[o] = data[o + 1] = data[o + 2] = 0;
          }
        }
      });
    });
  });
  return { data, width, height };
}

describe('terminal', () => {
  it('renders frames that scan back into the payload', () => {
    const plain = renderTerminalFrames(small, { ansi: false });
    expect(plain.length).toBe(encodeFrames(small, { chunkBytes: DEFAULT_TERMINAL_CHUNK_BYTES }).length);
    const collector = new FrameCollector();
    plain.forEach((frame, i) => {
      const lines = frame.trimEnd().split('\n');
      expect(lines.pop()).toBe(`frame ${i + 1}/${plain.length}`);
      expect(lines.every((l) => /^[ █▀▄]+$/.test(l))).toBe(true);
      const img = terminalToImage(lines.join('\n'));
      const text = decodeQrImage(img.data, img.width, img.height, 'dontInvert');
      expect(text).not.toBeNull();
      collector.add(text!);
    });
    expect(collector.result()).toBe(small);

    const coloured = renderTerminalFrames(small);
    expect(coloured.length).toBe(plain.length);
    expect(coloured[0]!.split('\n')[0]).toMatch(/^\x1b\[30;107m[ █▀▄]+\x1b\[0m$/);
    expect(renderTerminalFrames(small, { caption: false, ansi: false })[0]).toBe(
      `${plain[0]!.split('\nframe')[0]}\n`,
    );
  });

  it('animate cycles frames in order, stops after loops or on abort, with no TTY', async () => {
    const written: string[] = [];
    const n = await animate(['a', 'b', 'c'], (t) => written.push(t), 1, undefined, { loops: 2 });
    expect(n).toBe(6);
    expect(written).toEqual(['a', 'b', 'c', 'a', 'b', 'c'].map((f) => ANSI_HOME_CLEAR + f));

    const ac = new AbortController();
    const seen: string[] = [];
    const m = await animate(
      ['x', 'y'],
      (t) => {
        seen.push(t);
        if (seen.length === 5) ac.abort();
      },
      1,
      ac.signal,
      { clear: '' },
    );
    expect(m).toBe(5);
    expect(seen).toEqual(['x', 'y', 'x', 'y', 'x']);

    const aborted = AbortSignal.abort();
    expect(await animate(['x'], () => expect.unreachable(), 1, aborted)).toBe(0);
    expect((await asyncErrorOf(animate([], () => {}, 1))).code).toBe('invalid_options');
  });
});

describe('HTML page', () => {
  it('holds one SVG QR code per frame, the first one shown', async () => {
    const html = await renderHtmlAnimation(small, {
      chunkBytes: 200,
      title: 'Pay <Bob> & co',
      intervalMs: 500,
    });
    const n = encodeFrames(small, { chunkBytes: 200 }).length;
    expect(html.match(/<figure/g)!.length).toBe(n);
    expect(html.match(/<svg/g)!.length).toBe(n);
    expect(html.match(/<figure hidden>/g)!.length).toBe(n - 1);
    expect(html).toContain(`frame ${n}/${n}`);
    expect(html).toContain('Pay &#60;Bob&#62; &#38; co');
    expect(html).not.toContain('<Bob>');
  });
});
