/**
 * Webhook signatures, in the style of Standard Webhooks: each request
 * carries
 *
 *   webhook-id:        the event's id (the same on every retry: dedupe on it)
 *   webhook-timestamp: unix seconds of this attempt
 *   webhook-signature: `v1,<base64 HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>`,
 *                      one per active secret, separated by spaces (two while
 *                      a secret is being rotated)
 *
 * plus `x-canton-signer-event-seq` and `x-canton-signer-event-type`
 * (informational; not signed, the body carries both).
 *
 * A secret is at least 32 bytes: `whsec_<base64>` (the Standard Webhooks
 * form; the HMAC key is the decoded bytes) or any other string (the key is
 * its UTF-8 bytes). Secrets are `WebhookSecret` objects whose only printable
 * form is redacted: they never reach a log, an error or an answer.
 * `verifyWebhook` is what a receiver runs: constant-time comparison, a
 * timestamp tolerance (default 300 s), any listed signature may match.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { inspect } from 'node:util';

export const MIN_SECRET_BYTES = 32;
export const DEFAULT_TOLERANCE_SECONDS = 300;

export const HEADER_ID = 'webhook-id';
export const HEADER_TIMESTAMP = 'webhook-timestamp';
export const HEADER_SIGNATURE = 'webhook-signature';
export const HEADER_SEQ = 'x-canton-signer-event-seq';
export const HEADER_TYPE = 'x-canton-signer-event-type';

/** An HMAC key; prints as `[webhook secret]` (JSON, template strings, util.inspect). */
export class WebhookSecret {
  readonly #key: Buffer;
  constructor(key: Buffer) {
    this.#key = Buffer.from(key);
  }
  /** The HMAC of `message` under this secret. */
  hmac(message: string): Buffer {
    return createHmac('sha256', this.#key).update(message, 'utf8').digest();
  }
  toString(): string {
    return '[webhook secret]';
  }
  toJSON(): string {
    return '[webhook secret]';
  }
  [inspect.custom](): string {
    return '[webhook secret]';
  }
}

/**
 * The key of a secret as configured: `whsec_<base64>` decoded, else the
 * UTF-8 bytes. Throws an Error saying what is wrong (never quoting it).
 */
export function parseSecret(text: string): WebhookSecret {
  if (typeof text !== 'string' || text.length === 0) throw new Error('is empty');
  let key: Buffer;
  if (text.startsWith('whsec_')) {
    const b64 = text.slice('whsec_'.length);
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) throw new Error('starts with whsec_ but the rest is not base64');
    key = Buffer.from(b64, 'base64');
  } else key = Buffer.from(text, 'utf8');
  if (key.length < MIN_SECRET_BYTES)
    throw new Error(`is ${key.length} bytes; a webhook secret needs at least ${MIN_SECRET_BYTES}`);
  return new WebhookSecret(key);
}

/** The signed content: `<id>.<timestamp>.<body>`. */
export function signedContent(id: string, timestamp: number, body: string): string {
  return `${id}.${timestamp}.${body}`;
}

/** The `webhook-signature` value: one `v1,<base64>` per secret, space-separated. */
export function signatureHeader(
  secrets: readonly WebhookSecret[],
  id: string,
  timestamp: number,
  body: string,
): string {
  const content = signedContent(id, timestamp, body);
  return secrets.map((s) => `v1,${s.hmac(content).toString('base64')}`).join(' ');
}

/** Every header of one attempt to deliver `event` (body already serialised). */
export function webhookHeaders(
  secrets: readonly WebhookSecret[],
  event: { id: string; seq: number; type: string },
  body: string,
  nowSeconds = Math.floor(Date.now() / 1000),
): Record<string, string> {
  return {
    'content-type': 'application/json',
    [HEADER_ID]: event.id,
    [HEADER_TIMESTAMP]: String(nowSeconds),
    [HEADER_SIGNATURE]: signatureHeader(secrets, event.id, nowSeconds, body),
    [HEADER_SEQ]: String(event.seq),
    [HEADER_TYPE]: event.type,
  };
}

export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
}

/**
 * Checks a received webhook: `headers` (lower-case names) and the raw body
 * as received. Passes when the timestamp is within `toleranceSeconds` of
 * now and one of the `v1` signatures is the HMAC under one of `secrets`
 * (constant-time). Throws WebhookVerificationError saying which check
 * failed; returns the event id.
 */
export function verifyWebhook(
  secrets: readonly (WebhookSecret | string)[],
  headers: Record<string, string | string[] | undefined>,
  body: string,
  opts: { toleranceSeconds?: number; nowSeconds?: number } = {},
): string {
  const one = (name: string) => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const id = one(HEADER_ID);
  const ts = one(HEADER_TIMESTAMP);
  const sig = one(HEADER_SIGNATURE);
  if (!id || !ts || !sig)
    throw new WebhookVerificationError(
      `missing header ${!id ? HEADER_ID : !ts ? HEADER_TIMESTAMP : HEADER_SIGNATURE}`,
    );
  if (!/^[0-9]{1,15}$/.test(ts))
    throw new WebhookVerificationError(`${HEADER_TIMESTAMP} is not unix seconds`);
  const now = opts.nowSeconds ?? Math.floor(Date.now() / 1000);
  const tolerance = opts.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (Math.abs(now - Number(ts)) > tolerance)
    throw new WebhookVerificationError(`${HEADER_TIMESTAMP} is more than ${tolerance} s from now`);
  const keys = secrets.map((s) => (typeof s === 'string' ? parseSecret(s) : s));
  const content = signedContent(id, Number(ts), body);
  const expected = keys.map((k) => k.hmac(content));
  let ok = false;
  for (const part of sig.split(' ')) {
    const comma = part.indexOf(',');
    if (comma < 0 || part.slice(0, comma) !== 'v1') continue;
    const given = Buffer.from(part.slice(comma + 1), 'base64');
    // Every comparison is made (no early exit on a match): the time does not tell which secret matched.
    for (const e of expected) if (given.length === e.length && timingSafeEqual(given, e)) ok = true;
  }
  if (!ok) throw new WebhookVerificationError('no signature matches');
  return id;
}
