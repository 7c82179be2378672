import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { type AuthProvider, oauth2ClientCredentials, staticBearer } from '../../src/canton/auth.js';
import {
  CantonApiError,
  isUnavailable,
  JsCantonErrorSchema,
  parseRetryAfter,
  parseRetryInfo,
} from '../../src/canton/errors.js';
import { encodePath, HttpClient, type HttpLogger, joinUrl } from '../../src/canton/http.js';
import { type Handler, type Hit, type StubServer, send, startStubServer } from '../support/stub-server.js';

// ---------------------------------------------------------------------------------------------
// A real local HTTP server; each test registers the handlers of its own paths (any method).

let server: StubServer;
let baseUrl: string;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  server = await startStubServer();
  baseUrl = server.baseUrl;
});

afterAll(() => server.close());

afterEach(() => {
  vi.restoreAllMocks();
  server.reset();
});

interface LogLine {
  level: 'debug' | 'warn';
  obj: object;
  msg: string;
}
function spyLogger(): HttpLogger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  return {
    lines,
    debug: (obj, msg) => lines.push({ level: 'debug', obj, msg }),
    warn: (obj, msg) => lines.push({ level: 'warn', obj, msg }),
  };
}

function client(
  opts: Partial<ConstructorParameters<typeof HttpClient>[0]> = {},
): HttpClient & { log: LogLine[] } {
  const logger = spyLogger();
  const c = new HttpClient({
    baseUrl: `${baseUrl}/api/validator/`,
    service: 'validator',
    retry: { attempts: 3, baseDelayMs: 10, maxDelayMs: 100 },
    logger,
    ...opts,
  });
  return Object.assign(c, { log: logger.lines });
}

async function failure(p: Promise<unknown>): Promise<CantonApiError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(CantonApiError);
    return e as CantonApiError;
  }
  throw new Error('expected the call to fail');
}

// Realistic bodies, shaped like Canton's circe output (absent options printed as null).
const INVALID_ARGUMENT = {
  code: 'INVALID_ARGUMENT',
  cause:
    'The submitted request has invalid arguments: Invalid field signedBy: fingerprint 1220ab… is not a key of party alice::1220cd…',
  correlationId: 'c0ffee-42',
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  context: { participant: 'participant1', category: '8', definite_answer: 'false' },
  resources: [],
  errorCategory: 8,
  grpcCodeValue: 3,
  retryInfo: null,
  definiteAnswer: false,
};
const CONTENTION = {
  code: 'LOCAL_VERDICT_LOCKED_CONTRACTS',
  cause: 'Rejected transaction is referring to locked contracts',
  correlationId: null,
  traceId: null,
  context: { participant: 'participant1', category: '2' },
  resources: [['CONTRACT_ID', '00a1b2c3']],
  errorCategory: 2,
  grpcCodeValue: 10,
  retryInfo: '1 second',
  definiteAnswer: null,
};

const Topology = z.object({
  party_id: z.string(),
  topology_txs: z.array(z.object({ topology_tx: z.string(), hash: z.string().regex(/^1220[0-9a-f]{64}$/) })),
});
const HASH = `1220${'ab'.repeat(32)}`;

// ---------------------------------------------------------------------------------------------

describe('joinUrl / encodePath', () => {
  it('joins with exactly one slash and encodes the query', () => {
    expect(joinUrl('http://h/api/validator/', '/v0/x', undefined)).toBe('http://h/api/validator/v0/x');
    expect(joinUrl('http://h/api/validator', 'v0/x')).toBe('http://h/api/validator/v0/x');
    expect(joinUrl('http://h//', '//v2/y/')).toBe('http://h/v2/y/');
    expect(joinUrl('http://h/', '')).toBe('http://h');
    expect(
      joinUrl('http://h', '/v0/balance', {
        party_id: 'alice::1220ab',
        limit: 10,
        verbose: false,
        absent: undefined,
        'odd key': 'a b&c=d/é',
      }),
    ).toBe(
      'http://h/v0/balance?party_id=alice%3A%3A1220ab&limit=10&verbose=false&odd%20key=a%20b%26c%3Dd%2F%C3%A9',
    );
    expect(joinUrl('http://h', '/x', { a: undefined })).toBe('http://h/x');
  });

  it('encodePath encodes each interpolated value as one segment', () => {
    expect(encodePath`/v2/users/${'alice/../admin'}/rights`).toBe('/v2/users/alice%2F..%2Fadmin/rights');
    expect(encodePath`/v2/parties/${'p::1220ab'}`).toBe('/v2/parties/p%3A%3A1220ab');
    expect(encodePath`/plain`).toBe('/plain');
  });
});

describe('retry hints', () => {
  it('parses Scala Duration.toString retryInfo', () => {
    expect(parseRetryInfo('1 second')).toBe(1000);
    expect(parseRetryInfo('2 seconds')).toBe(2000);
    expect(parseRetryInfo('500 milliseconds')).toBe(500);
    expect(parseRetryInfo('500 ms')).toBe(500);
    expect(parseRetryInfo('1 minute')).toBe(60_000);
    expect(parseRetryInfo('1500000 microseconds')).toBe(1500);
    expect(parseRetryInfo('Duration.Inf')).toBeUndefined();
    expect(parseRetryInfo('3 fortnights')).toBeUndefined();
  });

  it('parses Retry-After seconds and dates', () => {
    expect(parseRetryAfter('3')).toBe(3000);
    expect(parseRetryAfter(null)).toBeUndefined();
    expect(parseRetryAfter('soon')).toBeUndefined();
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now)).toBe(0);
  });
});

describe('HttpClient: success and validation', () => {
  it('sends JSON, returns the zod-parsed body and keeps unknown fields out', async () => {
    const hits = server.route('*', '/api/validator/v0/admin/external-party/topology/generate', (res) =>
      send(res, 200, {
        party_id: 'alice::1220cd',
        topology_txs: [{ topology_tx: 'CgQ=', hash: HASH }],
        extra: 1,
      }),
    );
    const c = client({ auth: staticBearer('static-token-abc') });
    const out = await c.request({
      method: 'POST',
      path: '/v0/admin/external-party/topology/generate',
      body: { party_hint: 'alice', public_key: 'ab'.repeat(32) },
      response: Topology,
    });
    expect(out).toEqual({ party_id: 'alice::1220cd', topology_txs: [{ topology_tx: 'CgQ=', hash: HASH }] });
    expect(hits).toHaveLength(1);
    const h = hits[0]!;
    expect(h.method).toBe('POST');
    expect(h.headers['content-type']).toBe('application/json');
    expect(h.headers.accept).toBe('application/json');
    expect(h.headers.authorization).toBe('Bearer static-token-abc');
    expect(JSON.parse(h.body)).toEqual({ party_hint: 'alice', public_key: 'ab'.repeat(32) });
  });

  it('GET sends the query, no body and no content-type', async () => {
    const hits = server.route('*', '/api/validator/v0/admin/external-party/balance', (res) =>
      send(res, 200, { party_id: 'alice::1220cd', computed_as_of_round: 12 }),
    );
    const c = client();
    const out = await c.request({
      method: 'GET',
      path: 'v0/admin/external-party/balance',
      query: { party_id: 'alice::1220cd' },
      response: z.object({ party_id: z.string(), computed_as_of_round: z.number().int() }),
    });
    expect(out.computed_as_of_round).toBe(12);
    expect(hits[0]!.url).toBe('/api/validator/v0/admin/external-party/balance?party_id=alice%3A%3A1220cd');
    expect(hits[0]!.body).toBe('');
    expect(hits[0]!.headers['content-type']).toBeUndefined();
    expect(hits[0]!.headers.authorization).toBeUndefined();
    expect(c.log).toEqual([
      {
        level: 'debug',
        msg: 'canton request ok',
        obj: expect.objectContaining({
          service: 'validator',
          method: 'GET',
          path: '/v0/admin/external-party/balance', // no query, leading slash
          status: 200,
          attempt: 1,
          durationMs: expect.any(Number),
        }),
      },
    ]);
  });

  it('a body that fails the schema is INVALID_RESPONSE naming the first issue path, never retried', async () => {
    const hits = server.route('*', '/api/validator/v0/bad-shape', (res) =>
      send(res, 200, { party_id: 'p', topology_txs: [{ topology_tx: 'CgQ=', hash: 42 }] }),
    );
    const c = client();
    const e = await failure(c.request({ method: 'GET', path: '/v0/bad-shape', response: Topology }));
    expect(e.code).toBe('INVALID_RESPONSE');
    expect(e.status).toBe(200);
    expect(e.retryable).toBe(false);
    expect(e.ambiguous).toBe(false);
    expect(e.service).toBe('validator');
    expect(e.message).toContain('topology_txs.0.hash');
    expect(e.message).toContain('validator GET /v0/bad-shape');
    expect(e.message).not.toContain('\n');
    expect(hits).toHaveLength(1);
  });

  it('a non-JSON success body is INVALID_RESPONSE', async () => {
    server.route('*', '/api/validator/v0/html', (res) => send(res, 200, '<html>proxy login</html>'));
    const e = await failure(client().request({ method: 'GET', path: '/v0/html', response: z.unknown() }));
    expect(e.code).toBe('INVALID_RESPONSE');
    expect(e.message).toContain('not JSON');
  });

  it('empty bodies are fine when the schema accepts undefined, INVALID_RESPONSE otherwise', async () => {
    server.route('*', '/api/validator/v0/thing/1', (res) => send(res, 204));
    server.route('*', '/api/validator/v0/thing/2', (res) => send(res, 200));
    const c = client();
    await expect(
      c.request({ method: 'DELETE', path: '/v0/thing/1', response: z.undefined() }),
    ).resolves.toBeUndefined();
    await expect(
      c.request({ method: 'DELETE', path: '/v0/thing/2', response: z.object({}).optional() }),
    ).resolves.toBeUndefined();
    const e = await failure(c.request({ method: 'DELETE', path: '/v0/thing/2', response: z.object({}) }));
    expect(e.code).toBe('INVALID_RESPONSE');
    expect(e.message).toContain('empty response body');
  });

  it('okStatus widens what counts as success', async () => {
    server.route('*', '/api/validator/v0/maybe', (res) => send(res, 404, { error: 'none' }));
    const out = await client().request({
      method: 'GET',
      path: '/v0/maybe',
      okStatus: [200, 404],
      response: z.object({ error: z.string() }),
    });
    expect(out.error).toBe('none');
  });

  it('refuses a relative or non-http baseUrl', () => {
    expect(() => new HttpClient({ baseUrl: '/api', service: 'scan' })).toThrow(TypeError);
    expect(() => new HttpClient({ baseUrl: 'ftp://h', service: 'scan' })).toThrow(TypeError);
    expect(() => new HttpClient({ baseUrl: 'http://h?x=1', service: 'scan' })).toThrow(TypeError);
  });
});

describe('HttpClient: the body as it arrives', () => {
  it('decodes UTF-8 characters split between chunks, and a body of many chunks', async () => {
    const big = 'x'.repeat(200_000);
    server.route('*', '/api/validator/v0/split', async (res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const bytes = Buffer.from(JSON.stringify({ name: 'Zoë €uro 𝄞', big }), 'utf8');
      // Cut inside each multi-byte character, each part sent on its own.
      const cuts = [bytes.indexOf(0xc3) + 1, bytes.indexOf(0xe2) + 2, bytes.indexOf(0xf0) + 3, bytes.length];
      let at = 0;
      for (const cut of cuts) {
        res.write(bytes.subarray(at, cut));
        at = cut;
        await sleep(20);
      }
      res.end();
    });
    const out = await client().request({ method: 'GET', path: '/v0/split', response: z.unknown() });
    expect(out).toEqual({ name: 'Zoë €uro 𝄞', big });
  });
});

describe('HttpClient: error bodies', () => {
  it('parses a JsCantonError into code, category, cause and flags', async () => {
    const hits = server.route('*', '/v2/interactive-submission/execute', (res) =>
      send(res, 400, INVALID_ARGUMENT),
    );
    const c = client({ baseUrl, service: 'ledger-api' });
    const e = await failure(
      c.request({
        method: 'POST',
        path: '/v2/interactive-submission/execute',
        body: {},
        response: z.unknown(),
      }),
    );
    expect(e.status).toBe(400);
    expect(e.service).toBe('ledger-api');
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.category).toBe('InvalidIndependentOfSystemState');
    expect(e.cantonError?.cause).toBe(INVALID_ARGUMENT.cause);
    expect(e.cantonError?.correlationId).toBe('c0ffee-42');
    expect(e.cantonError?.retryInfo).toBeUndefined(); // null on the wire
    expect(e.cantonError?.definiteAnswer).toBe(false);
    expect(e.detail).toBe(INVALID_ARGUMENT.cause);
    expect(e.retryable).toBe(false);
    expect(e.retryAfterMs).toBeUndefined();
    expect(e.ambiguous).toBe(false);
    expect(e.spliceError).toBeUndefined();
    expect(e.message).toBe(
      'ledger-api POST /v2/interactive-submission/execute failed: status 400, code INVALID_ARGUMENT',
    );
    expect(hits).toHaveLength(1);
  });

  it('JsCantonError retryInfo makes the error retryable with a delay (POST: reported, not retried)', async () => {
    const hits = server.route('*', '/v2/commands/submit-and-wait', (res) => send(res, 409, CONTENTION));
    const c = client({ baseUrl, service: 'ledger-api' });
    const e = await failure(
      c.request({ method: 'POST', path: '/v2/commands/submit-and-wait', body: {}, response: z.unknown() }),
    );
    expect(e.code).toBe('LOCAL_VERDICT_LOCKED_CONTRACTS');
    expect(e.category).toBe('ContentionOnSharedResources');
    expect(e.cantonError?.resources).toEqual([['CONTRACT_ID', '00a1b2c3']]);
    expect(e.cantonError?.correlationId).toBeUndefined();
    expect(e.retryable).toBe(true);
    expect(e.retryAfterMs).toBe(1000);
    expect(e.ambiguous).toBe(false);
    expect(hits).toHaveLength(1);
  });

  it('a GET is retried after the retryInfo delay', async () => {
    const hits = server.route('*', '/v2/state/ledger-end', (res, _hit, n) =>
      n === 1
        ? send(res, 409, { ...CONTENTION, retryInfo: '120 milliseconds' })
        : send(res, 200, { offset: 7 }),
    );
    const c = client({
      baseUrl,
      service: 'ledger-api',
      retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 1000 },
    });
    const t0 = performance.now();
    const out = await c.request({
      method: 'GET',
      path: '/v2/state/ledger-end',
      response: z.object({ offset: z.number() }),
    });
    expect(out.offset).toBe(7);
    expect(hits).toHaveLength(2);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(110);
    expect(c.log.find((l) => l.msg.includes('retrying'))?.obj).toMatchObject({ delayMs: 120, attempt: 1 });
  });

  it('DeadlineExceededRequestStateUnknown on a POST is ambiguous', async () => {
    server.route('*', '/v2/commands/submit-and-wait-deadline', (res) =>
      send(res, 504, {
        ...CONTENTION,
        code: 'REQUEST_TIME_OUT',
        errorCategory: 3,
        grpcCodeValue: 4,
        cause: 'Timed out while awaiting for a completion',
      }),
    );
    const c = client({ baseUrl, service: 'ledger-api' });
    const e = await failure(
      c.request({
        method: 'POST',
        path: '/v2/commands/submit-and-wait-deadline',
        body: {},
        response: z.unknown(),
      }),
    );
    expect(e.category).toBe('DeadlineExceededRequestStateUnknown');
    expect(e.ambiguous).toBe(true);
    expect(e.retryable).toBe(true);
  });

  it('parses a Splice {error} 404', async () => {
    const hits = server.route('*', '/api/validator/v0/admin/external-party/setup-proposal', (res) =>
      send(res, 404, { error: 'No ExternalPartySetupProposal found for party alice::1220cd' }),
    );
    const e = await failure(
      client().request({
        method: 'GET',
        path: '/v0/admin/external-party/setup-proposal',
        response: z.unknown(),
      }),
    );
    expect(e.status).toBe(404);
    expect(e.code).toBe('HTTP_404');
    expect(e.spliceError).toBe('No ExternalPartySetupProposal found for party alice::1220cd');
    expect(e.cantonError).toBeUndefined();
    expect(e.category).toBeUndefined();
    expect(e.retryable).toBe(false);
    expect(e.message).toBe(
      'validator GET /v0/admin/external-party/setup-proposal failed: status 404, code HTTP_404',
    );
    expect(hits).toHaveLength(1);
  });

  it('keeps a plain-text Ledger API decode error as detail', async () => {
    server.route('*', '/v2/parties/external/allocate', (res) => {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end('Invalid value for: body (Missing required field at synchronizer)');
    });
    const e = await failure(
      client({ baseUrl, service: 'ledger-api' }).request({
        method: 'POST',
        path: '/v2/parties/external/allocate',
        body: {},
        response: z.unknown(),
      }),
    );
    expect(e.code).toBe('HTTP_400');
    expect(e.detail).toBe('Invalid value for: body (Missing required field at synchronizer)');
  });

  it('502/503/504/500/499 make a POST ambiguous (the request may have reached the node); a definite answer or 429 does not', async () => {
    server.route('*', '/api/validator/v0/s502', (res) => send(res, 502, '<html>Bad Gateway</html>'));
    server.route('*', '/api/validator/v0/s503slow', (res) =>
      send(res, 503, { error: 'The server is taking too long to respond to the request at /v0/s503slow' }),
    );
    server.route('*', '/api/validator/v0/s503', (res) => send(res, 503, { error: 'wallet not ready' }));
    server.route('*', '/api/validator/v0/s500', (res) => send(res, 500, { error: 'boom' }));
    server.route('*', '/api/validator/v0/s499', (res) => send(res, 499, { error: 'cancelled' }));
    server.route('*', '/api/validator/v0/s429', (res) => send(res, 429, { error: 'slow down' }));
    server.route('*', '/api/validator/v0/s503definite', (res) =>
      send(res, 503, {
        code: 'SERVICE_NOT_RUNNING',
        cause: 'shutting down',
        context: {},
        errorCategory: 1,
        definiteAnswer: true,
      }),
    );
    const c = client();
    const post = (path: string) =>
      failure(c.request({ method: 'POST', path, body: {}, response: z.unknown() }));
    for (const [path, ambiguous] of [
      ['/v0/s502', true],
      ['/v0/s503slow', true],
      ['/v0/s503', true],
      ['/v0/s500', true],
      ['/v0/s499', true],
      ['/v0/s429', false],
      ['/v0/s503definite', false],
    ] as const) {
      const e = await post(path);
      expect(e.ambiguous, path).toBe(ambiguous);
    }
    // A GET is never ambiguous: reading changes nothing.
    const get = await failure(c.request({ method: 'GET', path: '/v0/s500', response: z.unknown() }));
    expect(get.ambiguous).toBe(false);
  });
});

describe('HttpClient: retries', () => {
  it('retries a GET that fails twice with 503, with exponential backoff', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.999); // full jitter at its ceiling: deterministic waits
    const hits = server.route('*', '/api/validator/v0/flaky', (res, _hit, n) =>
      n <= 2 ? send(res, 503, { error: 'unavailable' }) : send(res, 200, { ok: true }),
    );
    const c = client({ retry: { attempts: 3, baseDelayMs: 40, maxDelayMs: 1000 } });
    const t0 = performance.now();
    const out = await c.request({
      method: 'GET',
      path: '/v0/flaky',
      response: z.object({ ok: z.boolean() }),
    });
    const elapsed = performance.now() - t0;
    expect(out.ok).toBe(true);
    expect(hits).toHaveLength(3);
    const retries = c.log.filter((l) => l.msg.includes('retrying')).map((l) => l.obj);
    expect(retries).toMatchObject([
      { attempt: 1, status: 503, code: 'HTTP_503', delayMs: 39 },
      { attempt: 2, status: 503, code: 'HTTP_503', delayMs: 79 },
    ]);
    expect(elapsed).toBeGreaterThanOrEqual(39 + 79 - 5);
    expect(c.log.at(-1)).toMatchObject({ level: 'debug', obj: { attempt: 3, status: 200 } });
  });

  it('full jitter stays below the doubling ceiling and maxDelayMs', async () => {
    const hits = server.route('*', '/api/validator/v0/down', (res) => send(res, 503, { error: 'down' }));
    const c = client({ retry: { attempts: 4, baseDelayMs: 20, maxDelayMs: 50 } });
    const e = await failure(c.request({ method: 'GET', path: '/v0/down', response: z.unknown() }));
    expect(e.code).toBe('HTTP_503');
    expect(hits).toHaveLength(4);
    const delays = c.log
      .filter((l) => l.msg.includes('retrying'))
      .map((l) => (l.obj as { delayMs: number }).delayMs);
    expect(delays).toHaveLength(3);
    [20, 40, 50].forEach((ceiling, i) => {
      expect(delays[i]).toBeGreaterThanOrEqual(0);
      expect(delays[i]).toBeLessThan(ceiling);
    });
  });

  it('does not retry a POST that gets 503', async () => {
    const hits = server.route('*', '/api/validator/v0/admin/external-party/topology/submit', (res) =>
      send(res, 503, { error: 'unavailable' }),
    );
    const c = client();
    const e = await failure(
      c.request({
        method: 'POST',
        path: '/v0/admin/external-party/topology/submit',
        body: {},
        response: z.unknown(),
      }),
    );
    expect(e.status).toBe(503);
    expect(e.retryable).toBe(true);
    // Not retried, and the caller must look before trying again: the node may have acted on it.
    expect(e.ambiguous).toBe(true);
    expect(hits).toHaveLength(1);
  });

  it('retries a POST marked idempotent', async () => {
    const hits = server.route('*', '/api/validator/v0/idem', (res, _hit, n) =>
      n === 1 ? send(res, 503, { error: 'x' }) : send(res, 200, {}),
    );
    await client().request({
      method: 'POST',
      path: '/v0/idem',
      body: {},
      idempotent: true,
      response: z.object({}),
    });
    expect(hits).toHaveLength(2);
  });

  it('honours Retry-After on a 429, capped by maxDelayMs', async () => {
    const hits = server.route('*', '/api/scan/v0/dso', (res, _hit, n) =>
      n === 1 ? send(res, 429, { error: 'rate limited' }, { 'retry-after': '1' }) : send(res, 200, { ok: 1 }),
    );
    const c = client({
      baseUrl: `${baseUrl}/api/scan`,
      service: 'scan',
      retry: { attempts: 2, baseDelayMs: 1, maxDelayMs: 5000 },
    });
    const t0 = performance.now();
    await c.request({ method: 'GET', path: '/v0/dso', response: z.object({ ok: z.number() }) });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(990);
    expect(hits).toHaveLength(2);
    expect(c.log.find((l) => l.msg.includes('retrying'))?.obj).toMatchObject({ status: 429, delayMs: 1000 });

    const capped = server.route('*', '/api/scan/v0/dso-capped', (res, _hit, n) =>
      n === 1
        ? send(res, 429, { error: 'rate limited' }, { 'retry-after': '3600' })
        : send(res, 200, { ok: 1 }),
    );
    const c2 = client({
      baseUrl: `${baseUrl}/api/scan`,
      service: 'scan',
      retry: { attempts: 2, baseDelayMs: 1, maxDelayMs: 60 },
    });
    await c2.request({ method: 'GET', path: '/v0/dso-capped', response: z.object({ ok: z.number() }) });
    expect(capped).toHaveLength(2);
    expect(c2.log.find((l) => l.msg.includes('retrying'))?.obj).toMatchObject({ delayMs: 60 });
  });

  it('does not retry 4xx client errors', async () => {
    const hits = server.route('*', '/api/validator/v0/forbidden', (res) =>
      send(res, 403, { error: 'not an operator' }),
    );
    const e = await failure(
      client().request({ method: 'GET', path: '/v0/forbidden', response: z.unknown() }),
    );
    expect(e.retryable).toBe(false);
    expect(hits).toHaveLength(1);
  });
});

describe('HttpClient: timeouts and network errors', () => {
  const slow: Handler = async (res) => {
    await sleep(400);
    if (!res.destroyed) send(res, 200, {});
  };

  it('a POST that times out is TIMEOUT, ambiguous, not retried', async () => {
    const hits = server.route('*', '/api/validator/v0/slow-post', slow);
    const e = await failure(
      client({ timeoutMs: 80 }).request({
        method: 'POST',
        path: '/v0/slow-post',
        body: {},
        response: z.unknown(),
      }),
    );
    expect(e.code).toBe('TIMEOUT');
    expect(e.status).toBe(0);
    expect(e.ambiguous).toBe(true);
    expect(e.retryable).toBe(true);
    expect(hits).toHaveLength(1);
  });

  it('a GET that times out is TIMEOUT, not ambiguous, and retried', async () => {
    const hits = server.route('*', '/api/validator/v0/slow-get', slow);
    const c = client({ timeoutMs: 400, retry: { attempts: 2, baseDelayMs: 1, maxDelayMs: 5 } });
    const e = await failure(
      c.request({ method: 'GET', path: '/v0/slow-get', timeoutMs: 60, response: z.unknown() }),
    );
    expect(e.code).toBe('TIMEOUT');
    expect(e.ambiguous).toBe(false);
    expect(hits).toHaveLength(2);
  });

  it('a timeout while the body streams is TIMEOUT too', async () => {
    server.route('*', '/api/validator/v0/slow-body', async (res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"a":');
      await sleep(300);
      if (!res.destroyed) res.end('1}');
    });
    const e = await failure(
      client({ timeoutMs: 80 }).request({
        method: 'POST',
        path: '/v0/slow-body',
        body: {},
        response: z.unknown(),
      }),
    );
    expect(e.code).toBe('TIMEOUT');
    expect(e.ambiguous).toBe(true);
  });

  it('a closed port is NETWORK; the request was never sent, so not ambiguous even for a POST', async () => {
    const tmp = createServer();
    await new Promise<void>((resolve) => tmp.listen(0, '127.0.0.1', resolve));
    const port = (tmp.address() as AddressInfo).port;
    await new Promise<void>((resolve) => tmp.close(() => resolve()));
    const c = client({
      baseUrl: `http://127.0.0.1:${port}/api/validator`,
      retry: { attempts: 2, baseDelayMs: 1, maxDelayMs: 2 },
    });
    const get = await failure(c.request({ method: 'GET', path: '/v0/x', response: z.unknown() }));
    expect(get.code).toBe('NETWORK');
    expect(get.status).toBe(0);
    expect(get.detail).toBe('ECONNREFUSED');
    expect(get.retryable).toBe(true);
    expect(c.log.filter((l) => l.msg.includes('retrying'))).toHaveLength(1);
    const post = await failure(c.request({ method: 'POST', path: '/v0/x', body: {}, response: z.unknown() }));
    expect(post.code).toBe('NETWORK');
    expect(post.ambiguous).toBe(false);
  });

  it('a redirect is not followed: reported with its status, the other location never called', async () => {
    const elsewhere = server.route('*', '/api/validator/v0/elsewhere', (res) => send(res, 200, { ok: true }));
    const hits = server.route('*', '/api/validator/v0/moved', (res) => {
      res.writeHead(302, { location: `${baseUrl}/api/validator/v0/elsewhere` });
      res.end();
    });
    const e = await failure(client().request({ method: 'GET', path: '/v0/moved', response: z.unknown() }));
    expect(e.status).toBe(302);
    expect(hits).toHaveLength(1);
    expect(elsewhere).toHaveLength(0);
  });

  it('calls reuse their connection (keep-alive)', async () => {
    const ports: (number | undefined)[] = [];
    const hits = server.route('*', '/api/validator/v0/alive', (res, _hit, _n, req) => {
      ports.push(req.socket.remotePort);
      send(res, 200, {});
    });
    const c = client();
    for (let i = 0; i < 5; i++) await c.request({ method: 'GET', path: '/v0/alive', response: z.unknown() });
    expect(hits).toHaveLength(5);
    expect(new Set(ports).size).toBe(1);
  });

  it('a connection dropped after the request was sent makes a POST ambiguous', async () => {
    const hits = server.route('*', '/api/validator/v0/drop', (_res, _hit, _n, req) => {
      req.socket.destroy();
    });
    const e = await failure(
      client().request({ method: 'POST', path: '/v0/drop', body: {}, response: z.unknown() }),
    );
    expect(e.code).toBe('NETWORK');
    expect(e.status).toBe(0);
    expect(e.ambiguous).toBe(true);
    expect(hits).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------
// OAuth2 client credentials against the same local server.

interface TokenServer {
  hits: Hit[];
  tokenUrl: string;
  /** Tokens handed out so far, in order. */
  issued: string[];
}
function tokenServer(
  name: string,
  opts: { expiresIn?: number; delayMs?: number; status?: number; body?: unknown } = {},
): TokenServer {
  const issued: string[] = [];
  const path = `/oauth/${name}/token`;
  const hits = server.route('*', path, async (res) => {
    if (opts.delayMs) await sleep(opts.delayMs);
    if (opts.status && opts.status !== 200) return send(res, opts.status, opts.body);
    const token = `tok-${name}-${issued.length + 1}-${Math.random().toString(36).slice(2)}`;
    issued.push(token);
    send(res, 200, { access_token: token, token_type: 'Bearer', expires_in: opts.expiresIn ?? 3600 });
  });
  return { hits, tokenUrl: `${baseUrl}${path}?tenant=t1`, issued };
}

const SECRET = 'sup3r-s3cret-client-secret';

describe('oauth2ClientCredentials', () => {
  it('posts a form-encoded client_credentials grant and caches the token across calls', async () => {
    const ts = tokenServer('cache');
    const auth = oauth2ClientCredentials({
      tokenUrl: ts.tokenUrl,
      clientId: 'canton-signer',
      clientSecret: SECRET,
      audience: 'https://canton.network.global',
      scope: 'daml_ledger_api',
    });
    const first = await auth.authorization();
    expect(await auth.authorization()).toBe(first);
    expect(await auth.authorization()).toBe(first);
    expect(first).toBe(`Bearer ${ts.issued[0]}`);
    expect(ts.hits).toHaveLength(1);
    const h = ts.hits[0]!;
    expect(h.method).toBe('POST');
    expect(h.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(Object.fromEntries(new URLSearchParams(h.body))).toEqual({
      grant_type: 'client_credentials',
      client_id: 'canton-signer',
      client_secret: SECRET,
      audience: 'https://canton.network.global',
      scope: 'daml_ledger_api',
    });
  });

  it('client_secret_basic sends the credentials in a Basic header instead', async () => {
    const ts = tokenServer('basic');
    const auth = oauth2ClientCredentials({
      tokenUrl: ts.tokenUrl,
      clientId: 'id:1',
      clientSecret: SECRET,
      clientAuth: 'client_secret_basic',
    });
    await auth.authorization();
    const h = ts.hits[0]!;
    expect(h.headers.authorization).toBe(`Basic ${Buffer.from(`id%3A1:${SECRET}`).toString('base64')}`);
    expect(Object.fromEntries(new URLSearchParams(h.body))).toEqual({ grant_type: 'client_credentials' });
  });

  it('refreshes after expires_in - skew', async () => {
    const ts = tokenServer('expiry', { expiresIn: 1 });
    const auth = oauth2ClientCredentials({
      tokenUrl: ts.tokenUrl,
      clientId: 'c',
      clientSecret: SECRET,
      refreshSkewMs: 850,
    });
    const a = await auth.authorization();
    expect(await auth.authorization()).toBe(a); // still within the 150 ms it is trusted
    await sleep(250);
    const b = await auth.authorization();
    expect(b).not.toBe(a);
    expect(b).toBe(`Bearer ${ts.issued[1]}`);
    expect(ts.hits).toHaveLength(2);
  });

  it('concurrent callers share one token request', async () => {
    const ts = tokenServer('concurrent', { delayMs: 60 });
    const auth = oauth2ClientCredentials({ tokenUrl: ts.tokenUrl, clientId: 'c', clientSecret: SECRET });
    const all = await Promise.all(Array.from({ length: 8 }, () => auth.authorization()));
    expect(new Set(all).size).toBe(1);
    expect(ts.hits).toHaveLength(1);
  });

  it('invalidate() forces a new token request', async () => {
    const ts = tokenServer('invalidate');
    const auth = oauth2ClientCredentials({ tokenUrl: ts.tokenUrl, clientId: 'c', clientSecret: SECRET });
    const a = await auth.authorization();
    auth.invalidate();
    const b = await auth.authorization();
    expect(a).not.toBe(b);
    expect(ts.hits).toHaveLength(2);
  });

  it('a token endpoint 401 is an oauth CantonApiError without the secret; the next call tries again', async () => {
    const ts = tokenServer('denied', {
      status: 401,
      body: {
        error: 'invalid_client',
        error_description: `Client authentication failed for secret ${SECRET}`,
      },
    });
    const auth = oauth2ClientCredentials({ tokenUrl: ts.tokenUrl, clientId: 'c', clientSecret: SECRET });
    const e = await failure(auth.authorization());
    expect(e.service).toBe('oauth');
    expect(e.status).toBe(401);
    expect(e.code).toBe('UNAUTHENTICATED');
    expect(e.method).toBe('POST');
    expect(e.path).toBe('/oauth/denied/token'); // no query string
    expect(e.retryable).toBe(false);
    expect(e.detail).toBe('invalid_client: Client authentication failed for secret ***');
    for (const text of [e.message, JSON.stringify(e), String(e.stack)]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain('tenant=t1');
    }
    await failure(auth.authorization());
    expect(ts.hits).toHaveLength(2); // failures are not cached
  });

  it('a token response without access_token is INVALID_RESPONSE', async () => {
    server.route('*', '/oauth/empty/token', (res) => send(res, 200, { token_type: 'Bearer' }));
    const auth = oauth2ClientCredentials({
      tokenUrl: `${baseUrl}/oauth/empty/token`,
      clientId: 'c',
      clientSecret: SECRET,
    });
    const e = await failure(auth.authorization());
    expect(e.service).toBe('oauth');
    expect(e.code).toBe('INVALID_RESPONSE');
  });

  it('a token endpoint that hangs is an oauth TIMEOUT', async () => {
    const ts = tokenServer('hang', { delayMs: 300 });
    const auth = oauth2ClientCredentials({
      tokenUrl: ts.tokenUrl,
      clientId: 'c',
      clientSecret: SECRET,
      timeoutMs: 50,
    });
    const e = await failure(auth.authorization());
    expect(e.service).toBe('oauth');
    expect(e.code).toBe('TIMEOUT');
  });
});

describe('HttpClient + auth: 401 handling and secrecy', () => {
  /** A resource that accepts only the newest token the token server issued. */
  function guarded(path: string, ts: TokenServer): Hit[] {
    return server.route('*', path, (res, hit) => {
      const newest = ts.issued.at(-1);
      if (hit.headers.authorization === `Bearer ${newest}` && ts.issued.length > 1) {
        return send(res, 200, { ok: true });
      }
      send(res, 401, {
        code: 'UNAUTHENTICATED',
        cause: 'The command is missing a (valid) JWT token',
        context: {},
        errorCategory: 6,
        grpcCodeValue: 16,
      });
    });
  }

  it('401 → invalidate + one retry with a new token (also for a POST)', async () => {
    const ts = tokenServer('rotate');
    const hits = guarded('/v2/parties/external/generate-topology', ts);
    const auth = oauth2ClientCredentials({ tokenUrl: ts.tokenUrl, clientId: 'c', clientSecret: SECRET });
    const invalidate = vi.spyOn(auth, 'invalidate');
    const c = client({ baseUrl, service: 'ledger-api', auth });
    const out = await c.request({
      method: 'POST',
      path: '/v2/parties/external/generate-topology',
      body: {},
      response: z.object({ ok: z.boolean() }),
    });
    expect(out.ok).toBe(true);
    expect(invalidate).toHaveBeenCalledTimes(1);
    expect(ts.hits).toHaveLength(2);
    expect(hits.map((h) => h.headers.authorization)).toEqual([
      `Bearer ${ts.issued[0]}`,
      `Bearer ${ts.issued[1]}`,
    ]);
  });

  it('a second 401 is final: UNAUTHENTICATED, not retryable', async () => {
    const calls: string[] = [];
    const auth: AuthProvider = {
      authorization: async () => 'Bearer never-valid',
      invalidate: () => calls.push('invalidate'),
    };
    const hits = server.route('*', '/api/validator/v0/always-401', (res) => send(res, 401));
    const e = await failure(
      client({ auth }).request({ method: 'GET', path: '/v0/always-401', response: z.unknown() }),
    );
    expect(e.code).toBe('UNAUTHENTICATED');
    expect(e.status).toBe(401);
    expect(e.retryable).toBe(false);
    expect(hits).toHaveLength(2);
    expect(calls).toEqual(['invalidate']);
  });

  it('a retryable token endpoint failure is retried for an idempotent call', async () => {
    let n = 0;
    server.route('*', '/oauth/flaky/token', (res) =>
      ++n === 1
        ? send(res, 503, { error: 'temporarily_unavailable' })
        : send(res, 200, { access_token: 'flaky-tok', expires_in: 60 }),
    );
    server.route('*', '/api/validator/v0/after-flaky-token', (res, hit) =>
      send(res, 200, { auth: hit.headers.authorization === 'Bearer flaky-tok' }),
    );
    const auth = oauth2ClientCredentials({
      tokenUrl: `${baseUrl}/oauth/flaky/token`,
      clientId: 'c',
      clientSecret: SECRET,
    });
    const out = await client({ auth }).request({
      method: 'GET',
      path: '/v0/after-flaky-token',
      response: z.object({ auth: z.boolean() }),
    });
    expect(out.auth).toBe(true);
    expect(n).toBe(2);
  });

  it('no token or secret in any log line or error message', async () => {
    const ts = tokenServer('secrecy');
    guarded('/v2/secret-resource', ts);
    server.route('*', '/v2/secret-fail', (res) => send(res, 503, INVALID_ARGUMENT));
    const auth = oauth2ClientCredentials({ tokenUrl: ts.tokenUrl, clientId: 'c', clientSecret: SECRET });
    const c = client({ baseUrl, service: 'ledger-api', auth });
    await c.request({ method: 'GET', path: '/v2/secret-resource', response: z.unknown() });
    const e1 = await failure(c.request({ method: 'GET', path: '/v2/secret-fail', response: z.unknown() }));
    const e2 = await failure(
      c.request({ method: 'GET', path: '/v2/secret-resource', response: z.object({ ok: z.string() }) }),
    );
    const e3 = await failure(
      oauth2ClientCredentials({
        tokenUrl: `${baseUrl}/oauth/nowhere/token`,
        clientId: 'c',
        clientSecret: SECRET,
      }).authorization(),
    );
    const bad = new HttpClient({
      baseUrl,
      service: 'ledger-api',
      auth: staticBearer('static-secret-token'),
      logger: {
        debug: (o, m) => c.log.push({ level: 'debug', obj: o, msg: m }),
        warn: (o, m) => c.log.push({ level: 'warn', obj: o, msg: m }),
      },
      retry: { attempts: 1, baseDelayMs: 1, maxDelayMs: 1 },
    });
    const e4 = await failure(bad.request({ method: 'GET', path: '/v2/secret-fail', response: z.unknown() }));

    expect(ts.issued.length).toBeGreaterThanOrEqual(2);
    expect(c.log.length).toBeGreaterThanOrEqual(6);
    const texts = [
      ...c.log.map((l) => `${l.msg} ${JSON.stringify(l.obj)}`),
      ...[e1, e2, e3, e4].flatMap((e) => [e.message, JSON.stringify(e), String(e.stack)]),
    ];
    const secrets = [SECRET, 'static-secret-token', ...ts.issued];
    for (const t of texts) {
      for (const s of secrets) expect(t).not.toContain(s);
      expect(t.toLowerCase()).not.toContain('bearer');
      expect(t).not.toContain('"ok"'); // no bodies
    }
    for (const l of c.log) {
      expect(Object.keys(l.obj).sort()).toEqual(
        expect.arrayContaining(['attempt', 'durationMs', 'method', 'path', 'service', 'status']),
      );
    }
  });
});

describe('isUnavailable: the service did not answer, or is unavailable for now', () => {
  const err = (o: Partial<ConstructorParameters<typeof CantonApiError>[0]>) =>
    new CantonApiError({
      status: 0,
      service: 'ledger-api',
      method: 'POST',
      path: '/v2/x',
      code: 'NETWORK',
      retryable: true,
      ambiguous: false,
      ...o,
    });
  it('connection errors, timeouts, 429/502/503/504 and TransientServerFailure are; the rest is not', () => {
    expect(isUnavailable(err({}))).toBe(true);
    expect(isUnavailable(err({ code: 'TIMEOUT' }))).toBe(true);
    for (const status of [429, 502, 503, 504])
      expect(isUnavailable(err({ status, code: `HTTP_${status}` }))).toBe(true);
    expect(isUnavailable(err({ status: 500, code: 'X', category: 'TransientServerFailure' }))).toBe(true);
    // a TLS failure is configuration, not an outage
    expect(isUnavailable(err({ retryable: false, detail: 'CERT_HAS_EXPIRED' }))).toBe(false);
    for (const status of [400, 401, 403, 404, 409, 500])
      expect(isUnavailable(err({ status, code: `HTTP_${status}`, retryable: false }))).toBe(false);
    expect(isUnavailable(new Error('ECONNREFUSED'))).toBe(false);
  });
});

describe('JsCantonErrorSchema', () => {
  it('accepts spec-shaped and null-filled errors, rejects ones missing required fields', () => {
    expect(JsCantonErrorSchema.safeParse(INVALID_ARGUMENT).success).toBe(true);
    expect(
      JsCantonErrorSchema.safeParse({ code: 'X', cause: 'y', context: {}, errorCategory: 9 }).success,
    ).toBe(true);
    expect(JsCantonErrorSchema.safeParse({ code: 'X', cause: 'y', errorCategory: 9 }).success).toBe(false);
    expect(JsCantonErrorSchema.safeParse({ error: 'splice' }).success).toBe(false);
    expect(JsCantonErrorSchema.safeParse({ ...INVALID_ARGUMENT, resources: [['only-one']] }).success).toBe(
      false,
    );
  });
});
