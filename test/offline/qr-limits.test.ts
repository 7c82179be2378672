/**
 * Security review: a QR frame PNG is decoded with no bound on its
 * dimensions. A few-KB PNG that declares 8000×8000 pixels is inflated to a
 * 256 MB RGBA buffer and scanned by jsQR before anything is refused; larger
 * dimensions exhaust the offline machine's memory. The safe behaviour is to
 * refuse an image whose header declares more pixels than any frame needs,
 * before decoding it.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32, deflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readQrPngs } from '../../src/offline/qr.js';

function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(td) >>> 0);
  return Buffer.concat([len, td, crc]);
}

/** A 1-bit greyscale PNG of `side`×`side` white pixels: tiny on disk, huge once decoded. */
function bomb(side: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(side, 0);
  ihdr.writeUInt32BE(side, 4);
  ihdr[8] = 1; // bit depth
  ihdr[9] = 0; // greyscale
  const row = Buffer.alloc(1 + Math.ceil(side / 8), 0xff);
  row[0] = 0; // filter: none
  const raw = Buffer.alloc(row.length * side);
  for (let y = 0; y < side; y++) row.copy(raw, y * row.length);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw, { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'canton-signer-qr-bomb-'));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe('QR frame PNGs from the transport', () => {
  it('an image declaring 8000×8000 pixels is refused before it is decoded', async () => {
    const png = bomb(8000);
    expect(png.length).toBeLessThan(64 * 1024);
    await writeFile(join(dir, 'frame-001-of-001.png'), png);
    const started = Date.now();
    const e = await readQrPngs(dir).then(
      () => undefined,
      (x: unknown) => x as { code?: string },
    );
    const ms = Date.now() - started;
    expect(e, 'expected a refusal').toBeDefined();
    expect(
      e?.code,
      `a ${png.length}-byte PNG was decoded to ${8000 * 8000 * 4} bytes of RGBA and scanned (${ms} ms) before the refusal`,
    ).not.toBe('no_qr_found');
  }, 120_000);
});
