/**
 * The air-gap tests' world: a service on the sandbox (serviceEnv) and a
 * separate "offline machine" keystore (file keys, plus an HSM backend when
 * given). Cold parties have their key generated offline and only the public
 * key registered with the service. Helpers drive the loop the way an
 * operator does: create a withdrawal, wait for `awaiting_signature`, take
 * its export, review and sign it offline.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { base64ToBytes } from '../../src/hashing/input.js';
import type { KeyBackend } from '../../src/keys/backend.js';
import type { KeyScheme } from '../../src/keys/schemes.js';
import type { Signer } from '../../src/keys/signer.js';
import {
  type AirGapResponse,
  parseRequestEnvelope,
  type TrustedExportKey,
  trustedExportKey,
} from '../../src/offline/format.js';
import { reviewRequest, signReview } from '../../src/offline/review.js';
import { hostExternalParty, sandboxPartyRecord } from '../../src/sandbox/host-party.js';
import type { ServiceOptions } from '../../src/server/service.js';
import type { PartyRecord } from '../../src/store/parties.js';
import type { Withdrawal } from '../../src/store/repos/withdrawals.js';
import { testSigner } from './flow-env.js';
import { type ServiceEnv, serviceEnv } from './service.js';

export interface Injected {
  status: number;
  body: Record<string, unknown> & { code?: string };
}

export interface ExportAnswer {
  export: { id: string; hashes: string[]; status: string; keyFingerprint: string };
  envelope: unknown;
}

export interface AirGapEnv {
  env: ServiceEnv;
  /** The offline machine's keystore: a file keystore in `coldDir` under `coldPassphrase`. */
  cold: Signer;
  coldDir: string;
  coldPassphrase: string;
  /** The service's export key, as the offline machine trusts it. */
  trusted: TrustedExportKey[];
  operator: { authorization: string };
  inject(
    method: 'GET' | 'POST',
    url: string,
    headers: Record<string, string>,
    payload?: unknown,
  ): Promise<Injected>;
  until<T>(f: () => Promise<T | undefined>, what: string, ms?: number): Promise<T>;
  withdrawalIn(id: string, states: string[]): Promise<Withdrawal>;
  /** Key `label` (default: the hint) made offline; its public key registered as `<label>-pub`; hosted and funded. */
  coldParty(
    hint: string,
    o?: { label?: string; scheme?: KeyScheme; backend?: 'file' | 'pkcs11' },
  ): Promise<PartyRecord>;
  /** POST /v1/withdrawals (operator) → its id. */
  createWithdrawal(party: string, extra?: Record<string, unknown>): Promise<string>;
  /** POST /v1/air-gap/exports for a parked withdrawal. */
  exportOf(withdrawalId: string): Promise<ExportAnswer>;
  /** The offline machine: parse the file, review (every check again), sign. */
  signOffline(envelope: unknown, o?: { keyLabel?: string }): Promise<AirGapResponse>;
  close(): Promise<void>;
}

export async function airGapEnv(o: {
  seed: string;
  hsm?: KeyBackend;
  /** Passed on to serviceEnv: the sandbox's clock, the withdrawal worker, the service's options. */
  sandboxClock?: boolean;
  worker?: boolean;
  service?: Partial<ServiceOptions>;
}): Promise<AirGapEnv> {
  const env = await serviceEnv({
    seed: o.seed,
    ...(o.sandboxClock !== undefined ? { sandboxClock: o.sandboxClock } : {}),
    ...(o.worker !== undefined ? { worker: o.worker } : {}),
    ...(o.service ? { service: o.service } : {}),
  });
  const coldDir = await mkdtemp(join(tmpdir(), 'canton-signer-cold-'));
  const coldPassphrase = 'cold machine passphrase';
  const cold = testSigner(coldDir, coldPassphrase, o.hsm);
  const operator = await env.auth(['operator']);
  // With the sandbox's clock moved, the offline machine judges windows by it too (the response's
  // signedAt stays the wall clock's, which is what the service's import compares it with).
  const offlineNow = o.sandboxClock ? { nowUs: () => env.flow.net.clock.now() } : {};

  const inject: AirGapEnv['inject'] = async (method, url, headers, payload) => {
    const r = await env.service.app.inject({
      method,
      url,
      headers,
      ...(payload !== undefined ? { payload: payload as object } : {}),
    });
    return { status: r.statusCode, body: r.json() as Injected['body'] };
  };

  const until: AirGapEnv['until'] = async (f, what, ms = 30_000) => {
    const end = Date.now() + ms;
    for (;;) {
      const v = await f();
      if (v !== undefined) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  // Setup: an admin creates the export key once; the operator reads it.
  const made = await inject('POST', '/v1/air-gap/export-key', await env.auth(['admin']));
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const k = await inject('GET', '/v1/air-gap/export-key', operator);
  expect(k.status).toBe(200);
  const trusted = [
    trustedExportKey(k.body.scheme as KeyScheme, base64ToBytes(String(k.body.publicKey), 'export key')),
  ];
  expect(trusted[0]!.fingerprint).toBe(k.body.fingerprint);

  return {
    env,
    cold,
    coldDir,
    coldPassphrase,
    trusted,
    operator,
    inject,
    until,
    withdrawalIn: (id, states) =>
      until(
        async () => {
          const w = await env.store.withdrawals.get(id);
          return w && states.includes(w.state) ? w : undefined;
        },
        `withdrawal ${id} in ${states.join('/')}`,
      ),
    async coldParty(hint, c = {}) {
      const label = c.label ?? hint;
      const scheme = c.scheme ?? 'ed25519';
      const key = await cold.generate({ label, scheme, backend: c.backend ?? 'file' });
      const pub = await env.flow.signer.importPublicKey(`${label}-pub`, scheme, key.publicKeySpki);
      const record = sandboxPartyRecord(env.flow.net, hint, pub);
      await env.store.parties.put(record);
      hostExternalParty(env.flow.net, record, { fund: '1000' });
      return record;
    },
    async createWithdrawal(party, extra = {}) {
      const r = await inject(
        'POST',
        '/v1/withdrawals',
        { ...operator, 'idempotency-key': `k-${Math.random()}` },
        { party, receiver: env.flow.net.validatorParty, amount: '5', ...extra },
      );
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return String(r.body.id);
    },
    async exportOf(withdrawalId) {
      const r = await inject('POST', '/v1/air-gap/exports', operator, { withdrawalId });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body as unknown as ExportAnswer;
    },
    async signOffline(envelope, s = {}) {
      const parsed = parseRequestEnvelope(JSON.stringify(envelope));
      const review = reviewRequest(parsed, { trusted, minWindowMs: 60_000, ...offlineNow });
      return signReview(review, cold, { ...s, ...offlineNow });
    },
    async close() {
      await env.close();
      await cold.close();
      await rm(coldDir, { recursive: true, force: true });
    },
  };
}
