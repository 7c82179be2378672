/**
 * QR framing for air-gap payloads (pure: no QR library, no I/O). Owns the frame text format, splitting a
 * payload string into frames and reassembling it (incrementally, in any order) with specific refusals.
 *
 * Frame text (every character is in the QR alphanumeric set, so a whole frame is one alphanumeric segment):
 *
 *   CSQR1:<index>/<total>:<digest>:<enc>:<check>:<chunk>
 *
 *   index/total  1-based decimal, 1 ≤ index ≤ total ≤ 9999
 *   digest       first 16 hex digits (uppercase) of SHA-256 over the whole payload's UTF-8 bytes; names the
 *                payload, so frames of two payloads are never mixed, and is re-checked after reassembly
 *   enc          Z = the bytes were deflated (raw deflate, node:zlib) before splitting; R = raw UTF-8 bytes
 *   check        first 8 hex digits (uppercase) of SHA-256 over the frame text without `<check>:`; each frame
 *                can be checked on its own, so a corrupted chunk is named by index before reassembly
 *   chunk        this frame's slice of the (deflated) bytes in base45 (RFC 9285 alphabet)
 *
 * Why base45: QR alphanumeric mode stores 2 characters in 11 bits, byte mode 1 character in 8 bits. Base45
 * stores 2 bytes in 3 alphanumeric characters = 16.5 bits per 16 data bits (97% efficient); base64 in byte
 * mode stores 6 data bits in 8 (75%), base32 in alphanumeric mode 5 in 5.5 (91%). The header uses uppercase
 * hex and `:/` so it stays alphanumeric too. Measured: 800 alphanumeric characters fit a version 18 symbol
 * (89×89 modules) at error-correction M, while 800 base64 characters in byte mode need version 23 (109×109).
 *
 * Why 500 bytes per frame by default: 500 bytes → 750 base45 characters + ~45 header ≈ 795 characters, i.e.
 * version 18 at level M (15% of codewords recoverable). That is about the largest symbol a phone or laptop
 * camera reads reliably off a screen or print in one glance; smaller frames mean more frames to show.
 *
 * Why deflate: a JSON document carrying a base64 protobuf compresses to ~21–31% of its size (measured on the
 * 20–55 KB real prepared transactions in the shared vectors), so 3–4× fewer frames. `compress: 'auto'` keeps
 * raw bytes when deflate does not help (tiny payloads).
 *
 * The digest detects accidents (mixed, stale or damaged frames); it is not an authenticity proof. Whoever
 * consumes the payload still verifies what it says (the signer recomputes the transaction hash).
 */
import { createHash } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';

export const FRAME_PREFIX = 'CSQR1';
export const DEFAULT_CHUNK_BYTES = 500;
export const MIN_CHUNK_BYTES = 16;
export const MAX_CHUNK_BYTES = 2000;
export const MAX_FRAMES = 9999;
/** Largest reassembled payload accepted (guards inflate against a decompression bomb). */
export const DEFAULT_MAX_PAYLOAD_BYTES = 16 * 1024 * 1024;

export type QrErrorCode =
  | 'not_a_frame' // the text is not a CSQR1 frame (another QR code, a malformed or unsupported frame)
  | 'frame_corrupt' // a CSQR1 frame whose own check fails or whose chunk is not valid base45
  | 'foreign_frame' // a frame of another payload (its digest differs from the frames already collected)
  | 'frame_conflict' // two different frames claim the same index of the same payload
  | 'header_mismatch' // same payload digest but a different total or encoding
  | 'missing_frames' // reassembly asked for before every index was seen (names the missing indexes)
  | 'digest_mismatch' // the reassembled payload does not hash to the digest its frames carry
  | 'payload_too_large' // too many frames to encode, or the reassembled payload exceeds the limit
  | 'invalid_payload' // the payload string is not well-formed UTF-16 (a lone surrogate)
  | 'invalid_options' // an option is out of range
  | 'no_images' // reading from a directory that holds no PNG files
  | 'unreadable_image' // a file that is not a readable PNG
  | 'no_qr_found' // a PNG in which no QR code could be found
  | 'output_exists'; // the output directory already holds frame PNGs

export interface QrErrorDetails {
  /** The file the error is about (PNG reading). */
  file?: string;
  /** 1-based frame index the error is about. */
  index?: number;
  /** 1-based indexes still missing (missing_frames). */
  missing?: number[];
}

export class QrTransportError extends Error {
  override readonly name = 'QrTransportError';
  readonly file: string | undefined;
  readonly index: number | undefined;
  readonly missing: number[] | undefined;
  constructor(
    readonly code: QrErrorCode,
    message: string,
    details: QrErrorDetails = {},
  ) {
    super(message);
    this.file = details.file;
    this.index = details.index;
    this.missing = details.missing;
  }
}

export type FrameEncoding = 'Z' | 'R';

export interface FrameOptions {
  /** Payload bytes per frame (after compression), 16–2000. Default 500 (≈795 characters, QR version 18/M). */
  chunkBytes?: number;
  /** Deflate before splitting: true, false, or 'auto' (default: only when it makes the bytes smaller). */
  compress?: boolean | 'auto';
}

export interface DecodeOptions {
  /** Refuse a reassembled payload larger than this many bytes (default 16 MiB). */
  maxPayloadBytes?: number;
}

export interface ParsedFrame {
  index: number;
  total: number;
  /** 16 uppercase hex digits: SHA-256 prefix of the whole payload. */
  digest: string;
  encoding: FrameEncoding;
  /** This frame's slice of the (possibly deflated) payload bytes. */
  chunk: Uint8Array;
  /** The frame text exactly as received. */
  text: string;
}

export interface FrameProgress {
  /** Distinct frames collected. */
  have: number;
  /** Frames in the payload, or null before the first frame. */
  total: number | null;
  /** 1-based indexes not yet seen (empty before the first frame). */
  missing: number[];
  complete: boolean;
  /** Digest of the payload being collected, or null before the first frame. */
  digest: string | null;
  /** Whether the last add() brought a new frame (false for an identical duplicate). */
  added: boolean;
}

// ---------------------------------------------------------------------------------------------- base45

const B45 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:';
const B45_VALUE = new Map<string, number>([...B45].map((c, i) => [c, i]));

/** Base45 (RFC 9285): each 2 bytes → 3 characters, a final odd byte → 2 characters. */
export function base45Encode(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i + 1 < bytes.length; i += 2) {
    let n = bytes[i]! * 256 + bytes[i + 1]!;
    const c = n % 45;
    n = (n - c) / 45;
    const d = n % 45;
    const e = (n - d) / 45;
    out += B45[c]! + B45[d]! + B45[e]!;
  }
  if (bytes.length % 2 === 1) {
    const n = bytes[bytes.length - 1]!;
    out += B45[n % 45]! + B45[Math.floor(n / 45)]!;
  }
  return out;
}

/** Strict base45 decoding; throws a plain Error naming what is wrong. */
export function base45Decode(text: string): Uint8Array {
  if (text.length % 3 === 1) throw new Error(`base45 text length ${text.length} leaves a single character`);
  const out = new Uint8Array(Math.floor(text.length / 3) * 2 + (text.length % 3 === 2 ? 1 : 0));
  const value = (pos: number): number => {
    const v = B45_VALUE.get(text[pos]!);
    if (v === undefined) throw new Error(`character at position ${pos} is not in the base45 alphabet`);
    return v;
  };
  let o = 0;
  for (let i = 0; i < text.length; i += 3) {
    if (i + 2 < text.length) {
      const n = value(i) + value(i + 1) * 45 + value(i + 2) * 2025;
      if (n > 0xffff) throw new Error(`base45 group at position ${i} exceeds 2 bytes`);
      out[o++] = n >> 8;
      out[o++] = n & 0xff;
    } else {
      const n = value(i) + value(i + 1) * 45;
      if (n > 0xff) throw new Error(`final base45 group at position ${i} exceeds 1 byte`);
      out[o++] = n;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------- frames

function sha256Hex(data: Uint8Array | string, hexDigits: number): string {
  return createHash('sha256').update(data).digest('hex').slice(0, hexDigits).toUpperCase();
}

/** SHA-256 prefix (16 uppercase hex digits) over the payload's UTF-8 bytes: the digest frames carry. */
export function payloadDigest(payload: string | Uint8Array): string {
  return sha256Hex(typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload, 16);
}

function frameCheck(unchecked: string): string {
  return sha256Hex(unchecked, 8);
}

/** Builds one frame's text (with its own check) from its fields. */
export function formatFrame(f: {
  index: number;
  total: number;
  digest: string;
  encoding: FrameEncoding;
  chunk: Uint8Array;
}): string {
  const head = `${FRAME_PREFIX}:${f.index}/${f.total}:${f.digest}:${f.encoding}:`;
  const body = base45Encode(f.chunk);
  return `${head}${frameCheck(head + body)}:${body}`;
}

function preview(text: string): string {
  const shown = text.length > 32 ? `${text.slice(0, 32)}…` : text;
  return `${JSON.stringify(shown)} (${text.length} characters)`;
}

/** Parses and checks one frame on its own. Throws not_a_frame or frame_corrupt. */
export function parseFrame(text: string): ParsedFrame {
  if (typeof text !== 'string') {
    throw new QrTransportError('not_a_frame', `a frame must be a string, got ${typeof text}`);
  }
  const version = /^CSQR(\d+):/.exec(text);
  if (!version) {
    throw new QrTransportError(
      'not_a_frame',
      `not a canton-signer QR frame (no CSQR1 prefix): ${preview(text)}`,
    );
  }
  if (version[1] !== '1') {
    throw new QrTransportError(
      'not_a_frame',
      `QR frame format version ${version[1]} is not supported (this reader knows CSQR1)`,
    );
  }
  const parts = text.split(':');
  if (parts.length < 6) {
    throw new QrTransportError(
      'not_a_frame',
      `malformed CSQR1 frame: fewer than 6 fields in ${preview(text)}`,
    );
  }
  const [, position, digest, encoding, check] = parts as [string, string, string, string, string];
  const chunkText = parts.slice(5).join(':');
  const pos = /^([1-9]\d{0,3})\/([1-9]\d{0,3})$/.exec(position);
  if (!pos) {
    throw new QrTransportError(
      'not_a_frame',
      `malformed CSQR1 frame: position ${JSON.stringify(position)} is not <index>/<total>`,
    );
  }
  const index = Number(pos[1]);
  const total = Number(pos[2]);
  if (index > total) {
    throw new QrTransportError(
      'not_a_frame',
      `malformed CSQR1 frame: index ${index} is beyond total ${total}`,
    );
  }
  if (!/^[0-9A-F]{16}$/.test(digest)) {
    throw new QrTransportError(
      'not_a_frame',
      `malformed CSQR1 frame ${index}/${total}: digest is not 16 uppercase hex digits`,
    );
  }
  if (encoding !== 'Z' && encoding !== 'R') {
    throw new QrTransportError(
      'not_a_frame',
      `malformed CSQR1 frame ${index}/${total}: encoding ${JSON.stringify(encoding)} is not Z or R`,
    );
  }
  if (!/^[0-9A-F]{8}$/.test(check)) {
    throw new QrTransportError(
      'not_a_frame',
      `malformed CSQR1 frame ${index}/${total}: check is not 8 uppercase hex digits`,
    );
  }
  const head = `${FRAME_PREFIX}:${position}:${digest}:${encoding}:`;
  if (frameCheck(head + chunkText) !== check) {
    throw new QrTransportError(
      'frame_corrupt',
      `frame ${index}/${total} is corrupt: its check does not match its content`,
      { index },
    );
  }
  let chunk: Uint8Array;
  try {
    chunk = base45Decode(chunkText);
  } catch (err) {
    throw new QrTransportError(
      'frame_corrupt',
      `frame ${index}/${total} is corrupt: its chunk is not valid base45 (${(err as Error).message})`,
      { index },
    );
  }
  return { index, total, digest, encoding, chunk, text };
}

function checkChunkBytes(chunkBytes: number): void {
  if (!Number.isInteger(chunkBytes) || chunkBytes < MIN_CHUNK_BYTES || chunkBytes > MAX_CHUNK_BYTES) {
    throw new QrTransportError(
      'invalid_options',
      `chunkBytes must be an integer from ${MIN_CHUNK_BYTES} to ${MAX_CHUNK_BYTES}, got ${String(chunkBytes)}`,
    );
  }
}

/** Splits a payload into frame texts (index order). */
export function encodeFrames(payload: string, opts: FrameOptions = {}): string[] {
  if (typeof payload !== 'string') {
    throw new QrTransportError('invalid_payload', `the payload must be a string, got ${typeof payload}`);
  }
  const lone = /[\uD800-\uDFFF]/u.exec(payload);
  if (lone) {
    throw new QrTransportError(
      'invalid_payload',
      `the payload is not well-formed text: lone surrogate at position ${lone.index} cannot be encoded as UTF-8`,
    );
  }
  const chunkBytes = opts.chunkBytes ?? DEFAULT_CHUNK_BYTES;
  checkChunkBytes(chunkBytes);
  const compress = opts.compress ?? 'auto';
  const raw = Buffer.from(payload, 'utf8');
  const digest = payloadDigest(raw);
  let bytes: Uint8Array = raw;
  let encoding: FrameEncoding = 'R';
  if (compress !== false) {
    const deflated = deflateRawSync(raw, { level: 9 });
    if (compress === true || deflated.length < raw.length) {
      bytes = deflated;
      encoding = 'Z';
    }
  }
  const total = Math.max(1, Math.ceil(bytes.length / chunkBytes));
  if (total > MAX_FRAMES) {
    throw new QrTransportError(
      'payload_too_large',
      `the payload needs ${total} frames of ${chunkBytes} bytes; at most ${MAX_FRAMES} are allowed`,
    );
  }
  const frames: string[] = [];
  for (let i = 0; i < total; i++) {
    const chunk = bytes.subarray(i * chunkBytes, (i + 1) * chunkBytes);
    frames.push(formatFrame({ index: i + 1, total, digest, encoding, chunk }));
  }
  return frames;
}

/**
 * Collects frames one at a time (e.g. from a camera loop) in any order. Identical duplicates are ignored; every
 * other problem throws a QrTransportError and leaves the collector unchanged, so a loop may report it and go on.
 */
export class FrameCollector {
  #digest: string | null = null;
  #total: number | null = null;
  #encoding: FrameEncoding | null = null;
  readonly #frames = new Map<number, ParsedFrame>();
  #result: string | undefined;

  constructor(private readonly opts: DecodeOptions = {}) {}

  /** Adds one frame text; returns the progress after it. */
  add(text: string): FrameProgress {
    const frame = parseFrame(text);
    const at = `frame ${frame.index}/${frame.total}`;
    if (this.#digest !== null && frame.digest !== this.#digest) {
      throw new QrTransportError(
        'foreign_frame',
        `${at} belongs to another payload (digest ${frame.digest}, collecting ${this.#digest})`,
        { index: frame.index },
      );
    }
    if (this.#total !== null && frame.total !== this.#total) {
      throw new QrTransportError(
        'header_mismatch',
        `${at} says the payload has ${frame.total} frames, earlier frames said ${this.#total}`,
        { index: frame.index },
      );
    }
    if (this.#encoding !== null && frame.encoding !== this.#encoding) {
      throw new QrTransportError(
        'header_mismatch',
        `${at} says encoding ${frame.encoding}, earlier frames said ${this.#encoding}`,
        { index: frame.index },
      );
    }
    const seen = this.#frames.get(frame.index);
    if (seen !== undefined) {
      if (seen.text !== frame.text) {
        throw new QrTransportError(
          'frame_conflict',
          `${at} was already collected with different content (two different frames claim index ${frame.index})`,
          { index: frame.index },
        );
      }
      return this.#progress(false);
    }
    this.#digest = frame.digest;
    this.#total = frame.total;
    this.#encoding = frame.encoding;
    this.#frames.set(frame.index, frame);
    return this.#progress(true);
  }

  progress(): FrameProgress {
    return this.#progress(false);
  }

  get complete(): boolean {
    return this.#total !== null && this.#frames.size === this.#total;
  }

  /** The reassembled payload; throws missing_frames, digest_mismatch or payload_too_large. */
  result(): string {
    if (this.#result !== undefined) return this.#result;
    const progress = this.#progress(false);
    if (this.#total === null) {
      throw new QrTransportError('missing_frames', 'no frames were collected', { missing: [] });
    }
    if (!progress.complete) {
      throw new QrTransportError(
        'missing_frames',
        `${progress.missing.length} of ${this.#total} frames are missing: ${listIndexes(progress.missing)}`,
        { missing: progress.missing },
      );
    }
    const chunks: Uint8Array[] = [];
    for (let i = 1; i <= this.#total; i++) chunks.push(this.#frames.get(i)!.chunk);
    const joined = Buffer.concat(chunks);
    const max = this.opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
    let bytes: Buffer;
    if (this.#encoding === 'Z') {
      try {
        bytes = inflateRawSync(joined, { maxOutputLength: max });
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        if (e.code === 'ERR_BUFFER_TOO_LARGE') {
          throw new QrTransportError(
            'payload_too_large',
            `the reassembled payload is larger than the ${max}-byte limit`,
          );
        }
        throw new QrTransportError(
          'digest_mismatch',
          `the reassembled payload (digest ${this.#digest}) could not be decompressed: ${e.message}`,
        );
      }
    } else {
      bytes = joined;
    }
    if (bytes.length > max) {
      throw new QrTransportError(
        'payload_too_large',
        `the reassembled payload is larger than the ${max}-byte limit`,
      );
    }
    const actual = payloadDigest(bytes);
    if (actual !== this.#digest) {
      throw new QrTransportError(
        'digest_mismatch',
        `the reassembled payload hashes to ${actual}, but its frames say ${this.#digest}`,
      );
    }
    try {
      this.#result = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      throw new QrTransportError('digest_mismatch', 'the reassembled payload is not valid UTF-8 text');
    }
    return this.#result;
  }

  #progress(added: boolean): FrameProgress {
    const missing: number[] = [];
    if (this.#total !== null) {
      for (let i = 1; i <= this.#total; i++) if (!this.#frames.has(i)) missing.push(i);
    }
    return {
      have: this.#frames.size,
      total: this.#total,
      missing,
      complete: this.complete,
      digest: this.#digest,
      added,
    };
  }
}

function listIndexes(indexes: number[]): string {
  const shown = indexes.slice(0, 50).join(', ');
  return indexes.length > 50 ? `${shown}, … (${indexes.length - 50} more)` : shown;
}

/** Reassembles a payload from all its frames (any order, identical duplicates allowed). */
export function decodeFrames(frames: Iterable<string>, opts: DecodeOptions = {}): string {
  const collector = new FrameCollector(opts);
  for (const frame of frames) collector.add(frame);
  return collector.result();
}
