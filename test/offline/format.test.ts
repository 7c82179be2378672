/**
 * The air-gap payload format on its own: the published JSON Schemas
 * (docs/air-gap-request.schema.json, docs/air-gap-response.schema.json) are
 * the ones the code generates — regenerate them with
 * `UPDATE_SCHEMAS=1 npx vitest run test/offline/format.test.ts && npx biome
 * format --write docs/air-gap-*.schema.json` after a format change (the files
 * are compared as JSON, so biome's layout is fine) — and the parsers and the response builder refuse what they
 * must, naming it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bytesToHex } from '../../src/hashing/input.js';
import type { Signer } from '../../src/keys/signer.js';
import {
  AirGapError,
  type AirGapRequestEnvelope,
  airGapJsonSchemas,
  buildResponse,
  openEnvelope,
  parseRequestEnvelope,
  parseResponse,
  REQUEST_FORMAT,
  type TopologyAirGapRequest,
  trustedExportKey,
} from '../../src/offline/format.js';
import { testSigner } from '../support/test-signer.js';

const DOCS = {
  request: new URL('../../docs/air-gap-request.schema.json', import.meta.url),
  response: new URL('../../docs/air-gap-response.schema.json', import.meta.url),
};

describe('published JSON Schemas', () => {
  for (const which of ['request', 'response'] as const)
    it(`docs/air-gap-${which}.schema.json is the schema the code generates`, () => {
      const generated = airGapJsonSchemas()[which];
      if (process.env.UPDATE_SCHEMAS) writeFileSync(DOCS[which], `${JSON.stringify(generated, null, 2)}\n`);
      const doc = JSON.parse(readFileSync(DOCS[which], 'utf8')) as {
        $schema: string;
        $id: string;
        additionalProperties?: boolean;
      };
      expect(doc, `docs/air-gap-${which}.schema.json is stale: regenerate it (see the file header)`).toEqual(
        generated,
      );
      expect(doc.$schema).toMatch(/2020-12/);
      expect(doc.$id).toMatch(/^https:\/\//);
      expect(doc.additionalProperties).toBe(false);
    });
});

let dir: string;
let signer: Signer;
let sealed: AirGapRequestEnvelope;

// A structurally valid topology request (its content is checked by the reviewer, not here).
const request: TopologyAirGapRequest = {
  format: REQUEST_FORMAT,
  kind: 'topology-transactions',
  synchronizerId: 'sync::1220aa',
  partyId: `p::1220${'ab'.repeat(32)}`,
  key: { fingerprint: `1220${'ab'.repeat(32)}`, scheme: 'ed25519', publicKey: 'AAAA' },
  transactions: ['AAAA'],
  claimedHashes: [`1220${'cd'.repeat(32)}`],
  expect: { participantUid: 'par::1220aa', permission: 'confirmation', threshold: 1, path: 'validator' },
  window: { latest: '2030-01-01T00:00:00Z', latestSource: 'test' },
  createdAt: '2026-01-01T00:00:00Z',
  nonce: 'ef'.repeat(32),
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'canton-signer-airgap-format-'));
  signer = testSigner(dir, 'format test');
  await signer.generate({ label: 'export', scheme: 'ecdsa-p256', backend: 'file' });
  const { sealRequest } = await import('../../src/offline/format.js');
  sealed = await sealRequest(request, signer, 'export');
});
afterAll(async () => {
  await signer?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function airGapError(f: () => unknown): AirGapError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(AirGapError);
    return e as AirGapError;
  }
  throw new Error('expected an AirGapError');
}

describe('envelopes', () => {
  it('a sealed request survives the trip as text and opens with the trusted key', async () => {
    const d = await signer.describe('export');
    const back = parseRequestEnvelope(JSON.stringify(sealed));
    expect(openEnvelope(back, [trustedExportKey(d.scheme, d.publicKeySpki)])).toEqual(request);
  });

  it('not JSON, another format version, a missing member: malformed, naming the field', () => {
    expect(airGapError(() => parseRequestEnvelope('{not json')).code).toBe('malformed');
    const v9 = airGapError(() =>
      parseRequestEnvelope({
        ...sealed,
        request: { ...sealed.request, format: 'canton-signer/air-gap-request@9' },
      }),
    );
    expect(v9.field).toBe('request.format');
    const { digest: _, ...noDigest } = sealed;
    const e = airGapError(() => parseRequestEnvelope(noDigest));
    expect(e.code).toBe('malformed');
    expect(e.field).toBe('envelope.digest');
  });

  it("a seal relabelled with another algorithm or format is refused even though the bytes are the key's", async () => {
    const d = await signer.describe('export');
    const t = [trustedExportKey(d.scheme, d.publicKeySpki)];
    const alg = airGapError(() =>
      openEnvelope(
        {
          ...sealed,
          exportSignature: {
            ...sealed.exportSignature,
            signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_ED25519',
          },
        },
        t,
      ),
    );
    expect([alg.code, alg.field]).toEqual([
      'export_signature_invalid',
      'envelope.exportSignature.signingAlgorithmSpec',
    ]);
    const fmt = airGapError(() =>
      openEnvelope(
        { ...sealed, exportSignature: { ...sealed.exportSignature, format: 'SIGNATURE_FORMAT_CONCAT' } },
        t,
      ),
    );
    expect([fmt.code, fmt.field]).toEqual(['export_signature_invalid', 'envelope.exportSignature.format']);
    const badKey = airGapError(() =>
      openEnvelope({ ...sealed, exportKey: { ...sealed.exportKey, publicKey: 'AAA=' } }, t),
    );
    expect(badKey.code).toBe('untrusted_exporter');
  });
});

describe('responses', () => {
  const sig = (by: string) => ({
    format: 'SIGNATURE_FORMAT_CONCAT' as const,
    signature: 'AAAA',
    signedBy: by,
    signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_ED25519' as const,
  });
  const fp = `1220${'ab'.repeat(32)}`;
  const h = new Uint8Array(34).fill(7);
  h[0] = 0x12;
  h[1] = 0x20;

  it('one signature per hash, all by one key; round-trips through parseResponse', () => {
    const r = buildResponse(sealed, [h], [sig(fp)], new Date('2026-01-01T00:00:00Z'));
    expect(parseResponse(JSON.stringify(r))).toEqual(r);
    expect(r.hashes).toEqual([bytesToHex(h)]);
    expect(airGapError(() => buildResponse(sealed, [h, h], [sig(fp)], new Date())).code).toBe('malformed');
    expect(
      airGapError(() => buildResponse(sealed, [h, h], [sig(fp), sig(`1220${'cd'.repeat(32)}`)], new Date()))
        .code,
    ).toBe('key_mismatch');
    const extra = airGapError(() => parseResponse({ ...r, note: 'x' }));
    expect(extra.code).toBe('malformed');
    expect(extra.message).toContain('note');
  });
});
