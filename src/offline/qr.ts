/**
 * QR transport for air-gap payloads (camera-only gaps). Owns turning a payload string into QR codes (a sheet of
 * PNG files, text QR frames for an animated terminal display, a single animated HTML page) and reading PNG
 * photos/scans of them back into the exact payload string. The frame format, reassembly and refusals live in
 * ./qr-frames.ts and are re-exported here; every refusal is a QrTransportError with a stable `code`.
 *
 *   writeQrPngs(payload, dir, opts?)        → Promise<string[]>  frame-001-of-012.png … (refuses a dir that
 *                                                                  already holds frame PNGs)
 *   readQrPngs(paths | dir, opts?)          → Promise<string>    the payload, or a QrTransportError naming the file
 *   decodeQrImage(rgba, width, height)      → string | null      one camera frame → QR text (for a camera loop
 *                                                                  feeding a FrameCollector)
 *   renderTerminalFrames(payload, opts?)    → string[]           half-block text QR per frame, with a caption
 *   animate(frames, write, intervalMs?, signal?, opts?) → Promise<number>  cycles frames until aborted / loops done
 *   renderHtmlAnimation(payload, opts?)     → Promise<string>    self-contained HTML page cycling SVG frames
 *
 * Symbols are encoded as a single alphanumeric segment at error-correction level M (frames are alphanumeric by
 * construction; see qr-frames.ts for why). Reading uses jsQR, one QR code per image.
 */
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import * as jsQRModule from 'jsqr';
import { PNG } from 'pngjs';
import QRCode from 'qrcode';
import {
  type DecodeOptions,
  encodeFrames,
  FrameCollector,
  type FrameOptions,
  QrTransportError,
} from './qr-frames.js';

export {
  base45Decode,
  base45Encode,
  DEFAULT_CHUNK_BYTES,
  DEFAULT_MAX_PAYLOAD_BYTES,
  type DecodeOptions,
  decodeFrames,
  encodeFrames,
  FRAME_PREFIX,
  FrameCollector,
  type FrameEncoding,
  type FrameOptions,
  type FrameProgress,
  formatFrame,
  MAX_FRAMES,
  type ParsedFrame,
  parseFrame,
  payloadDigest,
  type QrErrorCode,
  QrTransportError,
} from './qr-frames.js';

export type ErrorCorrection = 'L' | 'M' | 'Q' | 'H';

export interface SymbolOptions {
  /** QR error-correction level (default M: 15% of codewords recoverable). */
  errorCorrection?: ErrorCorrection;
  /** Quiet zone in modules (default 4 for PNG and HTML, 2 for the terminal). */
  margin?: number;
}

export interface PngOptions extends FrameOptions, SymbolOptions {
  /** Pixels per module (default 4: a version 18 symbol with margin 4 is 388×388 pixels). */
  scale?: number;
}

export interface TerminalOptions extends FrameOptions, SymbolOptions {
  /** Wrap each line in ANSI black-on-white so the code scans on dark themes too (default true). */
  ansi?: boolean;
  /** Add a "frame i/n" line under each code (default true). */
  caption?: boolean;
}

export interface ReadOptions extends DecodeOptions {
  /** jsQR inversion attempts (default 'attemptBoth': also reads light-on-dark photos). */
  inversion?: 'dontInvert' | 'onlyInvert' | 'attemptBoth' | 'invertFirst';
}

export interface HtmlOptions extends FrameOptions, SymbolOptions {
  /** Milliseconds per frame (default 700). */
  intervalMs?: number;
  /** Page title (default "canton-signer air-gap payload"). */
  title?: string;
}

/** Terminal frames are smaller than PNG frames so a code fits an ~70×38 terminal (250 bytes ≈ version 12, 65 modules + quiet zone). */
export const DEFAULT_TERMINAL_CHUNK_BYTES = 250;
/** ANSI "cursor home + clear screen", written before each frame by animate(). */
export const ANSI_HOME_CLEAR = '\x1b[H\x1b[2J';

const FRAME_FILE = /^frame-(\d+)-of-(\d+)\.png$/;

function segments(frame: string): QRCode.QRCodeSegment[] {
  return [{ data: frame, mode: 'alphanumeric' }];
}

function checkInteger(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new QrTransportError(
      'invalid_options',
      `${name} must be an integer from ${min} to ${max}, got ${String(value)}`,
    );
  }
  return value;
}

/** PNG file name of frame `index` of `total`: frame-001-of-012.png (at least 3 digits). */
export function frameFileName(index: number, total: number): string {
  const width = Math.max(3, String(total).length);
  return `frame-${String(index).padStart(width, '0')}-of-${String(total).padStart(width, '0')}.png`;
}

/** Writes one PNG per frame into `dir` (created if needed) and returns their paths in frame order. */
export async function writeQrPngs(payload: string, dir: string, opts: PngOptions = {}): Promise<string[]> {
  const frames = encodeFrames(payload, opts);
  const scale = checkInteger('scale', opts.scale ?? 4, 1, 32);
  const margin = checkInteger('margin', opts.margin ?? 4, 0, 16);
  await mkdir(dir, { recursive: true });
  const stale = (await readdir(dir)).filter((name) => FRAME_FILE.test(name));
  if (stale.length > 0) {
    throw new QrTransportError(
      'output_exists',
      `${dir} already holds ${stale.length} frame PNG(s) (e.g. ${stale[0]}); use an empty directory so frames of two payloads are not mixed`,
      { file: join(dir, stale[0]!) },
    );
  }
  const paths: string[] = [];
  for (const [i, frame] of frames.entries()) {
    const png = await QRCode.toBuffer(segments(frame), {
      type: 'png',
      errorCorrectionLevel: opts.errorCorrection ?? 'M',
      margin,
      scale,
    });
    const path = join(dir, frameFileName(i + 1, frames.length));
    await writeFile(path, png, { flag: 'wx' });
    paths.push(path);
  }
  return paths;
}

/** Finds one QR code in an RGBA image and returns its text, or null when there is none. */
export function decodeQrImage(
  rgba: Uint8Array | Uint8ClampedArray,
  width: number,
  height: number,
  inversion: ReadOptions['inversion'] = 'attemptBoth',
): string | null {
  const data = new Uint8ClampedArray(rgba.buffer, rgba.byteOffset, rgba.byteLength);
  // jsqr is CommonJS with an ES-style `default`: under NodeNext the callable is the namespace's default.
  const code = jsQRModule.default(data, width, height, { inversionAttempts: inversion });
  return code ? code.data : null;
}

async function listPngs(source: string | readonly string[]): Promise<string[]> {
  if (typeof source !== 'string') return [...source];
  let isDir: boolean;
  try {
    isDir = (await stat(source)).isDirectory();
  } catch (err) {
    throw new QrTransportError(
      'unreadable_image',
      `cannot read ${source}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      { file: source },
    );
  }
  if (!isDir) return [source];
  const names = (await readdir(source)).filter((n) => n.toLowerCase().endsWith('.png')).sort();
  return names.map((n) => join(source, n));
}

/**
 * Reads PNG photos/scans of frames (a list of files, or every *.png in a directory), one QR code per image, and
 * returns the payload. Any problem throws a QrTransportError naming the file (error.file) where there is one.
 */
export async function readQrPngs(
  source: string | readonly string[],
  opts: ReadOptions = {},
): Promise<string> {
  const files = await listPngs(source);
  if (files.length === 0) {
    throw new QrTransportError(
      'no_images',
      typeof source === 'string' ? `${source} holds no .png files` : 'no PNG files were given',
    );
  }
  const collector = new FrameCollector(opts);
  for (const file of files) {
    let png: PNG;
    try {
      const bytes = await readFile(file);
      checkPngSize(bytes, file);
      png = PNG.sync.read(bytes);
    } catch (err) {
      if (err instanceof QrTransportError) throw err;
      throw new QrTransportError(
        'unreadable_image',
        `${file} is not a readable PNG image: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
        { file },
      );
    }
    const text = decodeQrImage(png.data, png.width, png.height, opts.inversion);
    if (text === null) {
      throw new QrTransportError('no_qr_found', `no QR code was found in ${file}`, { file });
    }
    try {
      collector.add(text);
    } catch (err) {
      if (err instanceof QrTransportError) {
        throw new QrTransportError(err.code, `${file}: ${err.message}`, {
          file,
          index: err.index,
          missing: err.missing,
        });
      }
      throw err;
    }
  }
  return collector.result();
}

/** Renders one text as a half-block QR code (two modules per character row). */
export function renderTerminalQr(text: string, opts: SymbolOptions & { ansi?: boolean } = {}): string {
  const margin = checkInteger('margin', opts.margin ?? 2, 0, 16);
  const qr = QRCode.create(segments(text), { errorCorrectionLevel: opts.errorCorrection ?? 'M' });
  const size = qr.modules.size;
  const full = size + 2 * margin;
  const dark = (x: number, y: number): boolean => {
    const mx = x - margin;
    const my = y - margin;
    return mx >= 0 && my >= 0 && mx < size && my < size && qr.modules.get(my, mx) === 1;
  };
  const ansi = opts.ansi ?? true;
  const lines: string[] = [];
  for (let y = 0; y < full; y += 2) {
    let line = '';
    for (let x = 0; x < full; x++) {
      const top = dark(x, y);
      const bottom = y + 1 < full && dark(x, y + 1);
      line += top ? (bottom ? '█' : '▀') : bottom ? '▄' : ' ';
    }
    lines.push(ansi ? `\x1b[30;107m${line}\x1b[0m` : line);
  }
  return lines.join('\n');
}

/** Renders every frame of a payload as a terminal text QR code (for animate()). */
export function renderTerminalFrames(payload: string, opts: TerminalOptions = {}): string[] {
  const frames = encodeFrames(payload, {
    ...opts,
    chunkBytes: opts.chunkBytes ?? DEFAULT_TERMINAL_CHUNK_BYTES,
  });
  const caption = opts.caption ?? true;
  return frames.map((frame, i) => {
    const code = renderTerminalQr(frame, opts);
    return caption ? `${code}\nframe ${i + 1}/${frames.length}\n` : `${code}\n`;
  });
}

export interface AnimateOptions {
  /** Stop after this many passes over the frames (default: until the signal aborts). */
  loops?: number;
  /** Written before each frame (default ANSI home + clear screen; '' for none). */
  clear?: string;
}

/**
 * Writes the frames one after another, `intervalMs` apart, cycling until `signal` aborts or `loops` passes are
 * done. Resolves with the number of frames written (an abort is a normal stop, not an error).
 */
export async function animate(
  frames: readonly string[],
  write: (text: string) => void,
  intervalMs = 500,
  signal?: AbortSignal,
  opts: AnimateOptions = {},
): Promise<number> {
  if (frames.length === 0)
    throw new QrTransportError('invalid_options', 'animate() needs at least one frame');
  checkInteger('intervalMs', intervalMs, 1, 600_000);
  if (opts.loops !== undefined) checkInteger('loops', opts.loops, 1, Number.MAX_SAFE_INTEGER);
  const clear = opts.clear ?? ANSI_HOME_CLEAR;
  let written = 0;
  for (let loop = 0; opts.loops === undefined || loop < opts.loops; loop++) {
    for (const frame of frames) {
      if (signal?.aborted) return written;
      write(clear + frame);
      written++;
      try {
        await sleep(intervalMs, undefined, signal ? { signal } : {});
      } catch (err) {
        if ((err as Error).name === 'AbortError') return written;
        throw err;
      }
    }
  }
  return written;
}

/** A self-contained HTML page that cycles the payload's frames as SVG QR codes (pause/step with keys). */
export async function renderHtmlAnimation(payload: string, opts: HtmlOptions = {}): Promise<string> {
  const frames = encodeFrames(payload, opts);
  const intervalMs = checkInteger('intervalMs', opts.intervalMs ?? 700, 50, 60_000);
  const margin = checkInteger('margin', opts.margin ?? 4, 0, 16);
  const svgs = await Promise.all(
    frames.map((frame) =>
      QRCode.toString(segments(frame), {
        type: 'svg',
        errorCorrectionLevel: opts.errorCorrection ?? 'M',
        margin,
      }),
    ),
  );
  const title = (opts.title ?? 'canton-signer air-gap payload').replace(
    /[<>&"]/g,
    (c) => `&#${c.charCodeAt(0)};`,
  );
  const figures = svgs
    .map(
      (svg, i) =>
        `<figure${i === 0 ? '' : ' hidden'}>${svg}<figcaption>frame ${i + 1}/${frames.length}</figcaption></figure>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title}</title>
<style>body{margin:0;background:#fff;color:#000;font:16px sans-serif;text-align:center}
figure{margin:1em auto;width:min(90vmin,720px)}svg{width:100%;height:auto;display:block}
p{color:#555}</style></head>
<body><h1>${title}</h1>
${figures}
<p>Space: pause/resume · ←/→: previous/next frame · ${frames.length} frames, ${intervalMs} ms each</p>
<script>
const figs=[...document.querySelectorAll('figure')];let i=0,paused=false;
function show(n){figs[i].hidden=true;i=(n+figs.length)%figs.length;figs[i].hidden=false;}
setInterval(()=>{if(!paused)show(i+1);},${intervalMs});
document.addEventListener('keydown',(e)=>{if(e.key===' '){paused=!paused;e.preventDefault();}
else if(e.key==='ArrowRight'){paused=true;show(i+1);}else if(e.key==='ArrowLeft'){paused=true;show(i-1);}});
</script></body></html>
`;
}

/** Images larger than this are refused before decoding (a small PNG can declare a huge canvas). */
export const MAX_IMAGE_PIXELS = 4096 * 4096;
export const MAX_IMAGE_BYTES = 32 * 1024 * 1024;

/** Refuses a file too large, or a PNG whose header declares more than MAX_IMAGE_PIXELS, before any decoding. */
function checkPngSize(bytes: Buffer, file: string): void {
  if (bytes.length > MAX_IMAGE_BYTES)
    throw new QrTransportError(
      'unreadable_image',
      `${file} is ${bytes.length} bytes, more than the ${MAX_IMAGE_BYTES} a QR frame image may have`,
      { file },
    );
  // PNG signature (8 bytes), then the IHDR chunk: length (4), type (4), width (4), height (4).
  if (bytes.length < 24 || bytes.toString('latin1', 12, 16) !== 'IHDR') return; // pngjs names the problem
  const width = bytes.readUInt32BE(16);
  const height = bytes.readUInt32BE(20);
  if (width * height > MAX_IMAGE_PIXELS)
    throw new QrTransportError(
      'unreadable_image',
      `${file} declares ${width}×${height} pixels, more than a QR frame image may have (${MAX_IMAGE_PIXELS} pixels): refused before decoding`,
      { file },
    );
}
