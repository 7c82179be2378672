/**
 * Webhook signatures: the header values against HMACs computed here with
 * node:crypto (not through the module), rotation (two signatures, either
 * secret verifies), refusals (tampered body, tampered or old timestamp,
 * wrong secret), secrets never printed, and the receiver's verification
 * snippet of the documentation (the same logic, verbatim) against real
 * signed requests. Also the `webhooks:` configuration: defaults, http(s)
 * URLs only, secrets read from the environment with a ConfigError naming
 * the variable, never the value.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import {
  parseSecret,
  signatureHeader,
  verifyWebhook,
  WebhookVerificationError,
  webhookHeaders,
} from '../../src/events/signature.js';
import { ConfigError, configSchema, loadWebhookSecrets } from '../../src/server/config.js';

// ---- the documentation's snippet (docs: webhooks, "verifying a request"), the same logic ----
function verify(secret: string, headers: Record<string, string>, body: string, toleranceSec = 300) {
  const key = secret.startsWith('whsec_') ? Buffer.from(secret.slice(6), 'base64') : Buffer.from(secret);
  const { 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': sigs = '' } = headers;
  if (!(Math.abs(Date.now() / 1000 - Number(ts)) <= toleranceSec)) return false;
  const mac = createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest();
  const same = (b: Buffer) => b.length === mac.length && timingSafeEqual(b, mac);
  return sigs.split(' ').some((s) => s.startsWith('v1,') && same(Buffer.from(s.slice(3), 'base64')));
}
// ---- end of the snippet ----

const RAW = 'a-raw-webhook-secret-of-at-least-32-bytes';
const KEY_BYTES = randomBytes(32);
const WHSEC = `whsec_${KEY_BYTES.toString('base64')}`;
const ID = '0b0e6a3c-7d2e-4f5a-9b1c-2d3e4f5a6b7c';
const BODY = JSON.stringify({ id: ID, seq: 7, type: 'withdrawal.committed', data: { amount: '10.5' } });

const hmac = (key: Buffer | string, text: string) => createHmac('sha256', key).update(text).digest('base64');

describe('webhook signatures', () => {
  it('signs "<id>.<timestamp>.<body>" with HMAC-SHA256 under the decoded whsec_ key or the raw bytes', () => {
    const ts = 1_764_200_000;
    expect(signatureHeader([parseSecret(WHSEC)], ID, ts, BODY)).toBe(
      `v1,${hmac(KEY_BYTES, `${ID}.${ts}.${BODY}`)}`,
    );
    expect(signatureHeader([parseSecret(RAW)], ID, ts, BODY)).toBe(
      `v1,${hmac(Buffer.from(RAW, 'utf8'), `${ID}.${ts}.${BODY}`)}`,
    );
    // A fixed vector: key "k" × 32, id "msg_1", timestamp 1, body "{}".
    const fixed = 'k'.repeat(32);
    expect(signatureHeader([parseSecret(fixed)], 'msg_1', 1, '{}')).toBe(`v1,${hmac(fixed, 'msg_1.1.{}')}`);
  });

  it('during a rotation carries two signatures; a receiver with either secret verifies', () => {
    const now = Math.floor(Date.now() / 1000);
    const headers = webhookHeaders(
      [parseSecret(WHSEC), parseSecret(RAW)],
      { id: ID, seq: 7, type: 'withdrawal.committed' },
      BODY,
      now,
    );
    expect(headers['webhook-id']).toBe(ID);
    expect(headers['webhook-timestamp']).toBe(String(now));
    expect(headers['x-canton-signer-event-seq']).toBe('7');
    expect(headers['x-canton-signer-event-type']).toBe('withdrawal.committed');
    const parts = headers['webhook-signature']!.split(' ');
    expect(parts).toEqual([
      `v1,${hmac(KEY_BYTES, `${ID}.${now}.${BODY}`)}`,
      `v1,${hmac(Buffer.from(RAW), `${ID}.${now}.${BODY}`)}`,
    ]);
    for (const secret of [WHSEC, RAW]) {
      expect(verifyWebhook([secret], headers, BODY)).toBe(ID);
      expect(verify(secret, headers, BODY)).toBe(true);
    }
    const other = `whsec_${randomBytes(32).toString('base64')}`;
    expect(() => verifyWebhook([other], headers, BODY)).toThrow('no signature matches');
    expect(verify(other, headers, BODY)).toBe(false);
    // The receiver may itself hold two (old and new): one match is enough.
    expect(verifyWebhook([other, RAW], headers, BODY)).toBe(ID);
  });

  it('refuses a tampered body, a tampered timestamp, an old timestamp and missing headers', () => {
    const now = Math.floor(Date.now() / 1000);
    const ev = { id: ID, seq: 7, type: 'withdrawal.committed' };
    const headers = webhookHeaders([parseSecret(WHSEC)], ev, BODY, now);
    const tampered = BODY.replace('10.5', '100.5');
    expect(() => verifyWebhook([WHSEC], headers, tampered)).toThrow(WebhookVerificationError);
    expect(verify(WHSEC, headers, tampered)).toBe(false);
    const moved = { ...headers, 'webhook-timestamp': String(now + 1) };
    expect(() => verifyWebhook([WHSEC], moved, BODY)).toThrow('no signature matches');
    expect(verify(WHSEC, moved, BODY)).toBe(false);
    const otherId = { ...headers, 'webhook-id': 'another' };
    expect(() => verifyWebhook([WHSEC], otherId, BODY)).toThrow('no signature matches');
    // Correctly signed, but 301 s old: replayed too late.
    const old = webhookHeaders([parseSecret(WHSEC)], ev, BODY, now - 301);
    expect(() => verifyWebhook([WHSEC], old, BODY)).toThrow('more than 300 s');
    expect(verify(WHSEC, old, BODY)).toBe(false);
    expect(verifyWebhook([WHSEC], old, BODY, { toleranceSeconds: 600 })).toBe(ID);
    const { 'webhook-timestamp': _, ...noTs } = headers;
    expect(() => verifyWebhook([WHSEC], noTs, BODY)).toThrow('missing header webhook-timestamp');
    expect(verify(WHSEC, noTs, BODY)).toBe(false);
    expect(verify(WHSEC, { ...headers, 'webhook-signature': 'v2,abc' }, BODY)).toBe(false);
  });

  it('needs at least 32 bytes and never prints a secret', () => {
    expect(() => parseSecret('x'.repeat(31))).toThrow('is 31 bytes; a webhook secret needs at least 32');
    expect(() => parseSecret(`whsec_${randomBytes(16).toString('base64')}`)).toThrow('is 16 bytes');
    expect(() => parseSecret('whsec_not base64!')).toThrow('not base64');
    const s = parseSecret(RAW);
    for (const shown of [String(s), JSON.stringify({ s }), inspect(s), `${s}`])
      expect(shown).not.toContain(RAW.slice(0, 8));
    try {
      parseSecret('short-secret-value');
    } catch (e) {
      expect((e as Error).message).not.toContain('short-secret-value');
    }
  });
});

describe('the webhooks configuration', () => {
  const base = {
    network: { sandbox: true },
    auth: { issuer: 'i', audience: 'a', sharedSecret: 'x'.repeat(32), algorithms: ['HS256'] },
  };

  it('has defaults and refuses a receiver URL that is not http(s)', () => {
    const cfg = configSchema.parse({
      ...base,
      webhooks: { receivers: [{ name: 'exchange', url: 'https://x.test/hook', secretEnv: ['WH_A'] }] },
    });
    expect(cfg.webhooks.retry).toEqual({
      horizonSeconds: 259_200,
      initialSeconds: 5,
      maxIntervalSeconds: 3600,
    });
    expect(cfg.webhooks.receivers[0]).toMatchObject({ events: ['*'], timeoutMs: 10_000, enabled: true });
    expect(configSchema.parse(base).webhooks.receivers).toEqual([]);
    const bad = configSchema.safeParse({
      ...base,
      webhooks: {
        receivers: [
          { name: 'a', url: 'ftp://x.test/hook', secretEnv: ['WH_A'] },
          { name: 'b', url: 'http://x.test/hook', secretEnv: ['A', 'B', 'C'], events: ['Deposit'] },
        ],
      },
    });
    expect(bad.success).toBe(false);
    const paths = bad.error?.issues.map((i) => i.path.join('.'));
    expect(paths).toEqual(
      expect.arrayContaining([
        'webhooks.receivers.0.url',
        'webhooks.receivers.1.secretEnv',
        'webhooks.receivers.1.events.0',
      ]),
    );
    const twice = configSchema.safeParse({
      ...base,
      webhooks: {
        receivers: [
          { name: 'a', url: 'https://x.test/1', secretEnv: ['A'] },
          { name: 'a', url: 'https://x.test/2', secretEnv: ['B'] },
        ],
      },
    });
    expect(twice.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
      ['webhooks.receivers.1.name', 'a is named twice'],
    ]);
  });

  it('reads each secret from its environment variable; missing or short: ConfigError naming it, not the value', () => {
    const cfg = configSchema.parse({
      ...base,
      webhooks: {
        receivers: [
          { name: 'a', url: 'https://x.test/a', secretEnv: ['WH_A', 'WH_A_NEXT'] },
          { name: 'b', url: 'https://x.test/b', secretEnv: ['WH_B'] },
          { name: 'off', url: 'https://x.test/c', secretEnv: ['WH_UNSET'], enabled: false },
        ],
      },
    }).webhooks;
    const ok = loadWebhookSecrets(cfg, { WH_A: WHSEC, WH_A_NEXT: RAW, WH_B: RAW });
    expect(ok.get('a')).toHaveLength(2);
    expect(ok.get('b')).toHaveLength(1);
    expect(ok.has('off')).toBe(false);
    const short = 'too-short-secret';
    let err: unknown;
    try {
      loadWebhookSecrets(cfg, { WH_A: WHSEC, WH_A_NEXT: short });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as Error).message;
    expect(message).toContain('webhooks.receivers[0].secretEnv[1] (WH_A_NEXT)');
    expect(message).toContain('WH_A_NEXT is 16 bytes');
    expect(message).toContain('webhooks.receivers[1].secretEnv[0] (WH_B): WH_B is not set');
    expect(message).not.toContain(short);
    expect(message).not.toContain(WHSEC);
  });
});

describe('the service start', () => {
  it('stops with a ConfigError naming the variable of a missing secret, before opening anything', async () => {
    const { createService } = await import('../../src/server/service.js');
    const config = configSchema.parse({
      network: { sandbox: true },
      auth: { issuer: 'i', audience: 'a', sharedSecret: 'x'.repeat(32), algorithms: ['HS256'] },
      database: { dataDir: '/nonexistent/never-opened' },
      webhooks: { receivers: [{ name: 'exchange', url: 'https://x.test/h', secretEnv: ['WH_MISSING'] }] },
    });
    const start = createService({ config, env: {} });
    await expect(start).rejects.toBeInstanceOf(ConfigError);
    await expect(start).rejects.toThrow(
      'webhooks.receivers[0].secretEnv[0] (WH_MISSING): WH_MISSING is not set',
    );
  });
});
