/**
 * The online side of the air gap. Export: a transaction that
 * passed every check of the pipeline, for a party whose key is held offline,
 * becomes a sealed request (format.ts) recorded in the store; the flow stops
 * with `AwaitingSignature`. Import: a response is accepted only if it answers
 * an export made here (nonce, digest), once, for the same party and hashes,
 * signed by the party's registered key (each signature verified), with the
 * window still open; a closed window makes the export stale so that the flow
 * prepares again and exports anew — a stale transaction is never submitted.
 * The imported signatures are what the offline key backend hands the
 * pipeline (`signatureFor`), where they are verified once more. Every refused
 * import is audited (`air-gap.import-refused`: actor, export, reason).
 * The export key is created only on request (`createExportKey`, an admin's
 * act, audited as `key.put`): reading it and exporting never create a key.
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { isAccessDenied, isCantonApiError, upstreamSentence } from '../canton/errors.js';
import { type AirGapExporter, AwaitingSignature, type TopologyExport } from '../flows/air-gap.js';
import type { Verified } from '../flows/pipeline.js';
import { Refusal } from '../flows/refusal.js';
import { describeWindow } from '../flows/window.js';
import { fingerprint } from '../hashing/canton-hash.js';
import { base64ToBytes, bytesToHex, hexToBytes } from '../hashing/input.js';
import { KeyError } from '../keys/backend.js';
import { aKeyOf, SCHEMES, verifySignature } from '../keys/schemes.js';
import type { KeyDescription, Signer } from '../keys/signer.js';
import type { Json } from '../store/canonical.js';
import type { Store } from '../store/index.js';
import type { ExportRecord } from '../store/repos/air-gap.js';
import {
  AirGapError,
  type AirGapRequest,
  type AirGapResponse,
  newNonce,
  parseResponse,
  REQUEST_FORMAT,
  sealRequest,
} from './format.js';

export const DEFAULT_EXPORT_KEY = 'air-gap-export';
/** An imported signature is used only while its window leaves this much time to submit. */
export const SUBMIT_MARGIN_MS = 30_000;

export interface OnlineAirGapOptions {
  /** Label of the export key (an Ed25519 file key made by `createExportKey`). Default `air-gap-export`. */
  exportKeyLabel?: string;
  /** An import is refused when the window closes sooner than this (default 30 s): submitting takes time. */
  importMarginMs?: number;
  /** Lifetime of an onboarding (topology) request, which has no ledger deadline (default 7 days). */
  topologyWindowMs?: number;
  /** Tolerated clock difference between this service and the offline machine (default 5 min). */
  clockSkewMs?: number;
  now?: () => Date;
}

/** Where an export came from, so that the flow can go on after the import. */
export interface ExportScope {
  subject: string;
  withdrawalId?: string;
  /** The worker carrying the withdrawal: its request is recorded only while it holds the lease. */
  lease?: string;
  context?: Record<string, Json>;
  actor?: string;
}

export interface ImportResult {
  export: ExportRecord;
  response: AirGapResponse;
}

export class OnlineAirGap {
  private readonly label: string;
  private exportKeyP: Promise<KeyDescription> | undefined;
  /** The export whose imported signatures the code running now may use (see `withExport`), and whether one was handed out to it. */
  private readonly claim = new AsyncLocalStorage<{ id: string; handedOut: boolean }>();

  constructor(
    private readonly store: Store,
    private readonly signer: Signer,
    private readonly opts: OnlineAirGapOptions = {},
  ) {
    this.label = opts.exportKeyLabel ?? DEFAULT_EXPORT_KEY;
  }

  private now(): Date {
    return this.opts.now?.() ?? new Date();
  }

  /**
   * The export key; `export_key_missing` while none was created. Only reads:
   * a missing key is made by `createExportKey`, never here.
   */
  exportKey(): Promise<KeyDescription> {
    this.exportKeyP ??= this.signer.describe(this.label).catch((e: unknown) => {
      if (e instanceof KeyError && e.code === 'key_not_found')
        throw new AirGapError(
          'export_key_missing',
          `there is no air-gap export key (${this.label}) yet: an admin creates it once with POST /v1/air-gap/export-key (canton-signer export-key --create)`,
        );
      throw e;
    });
    this.exportKeyP.catch(() => {
      this.exportKeyP = undefined;
    });
    return this.exportKeyP;
  }

  /**
   * Creates the export key (Ed25519, file keystore) when there is none,
   * audited as `key.create` by `actor` before it is made, and records it in
   * the key table (`key.put`). An
   * existing key is kept (and recorded if the key table lacks it).
   */
  async createExportKey(actor: string): Promise<{ key: KeyDescription; created: boolean }> {
    let key: KeyDescription;
    let created = false;
    try {
      if (await this.signer.has(this.label)) throw new KeyError('key_exists', `${this.label} exists`);
      // Audited before the key exists (key.create), recorded once made (key.put) or closed by
      // key.create_refused.
      key = await this.store.keys.creating(
        { label: this.label, scheme: 'ed25519', backend: 'file' },
        actor,
        () => this.signer.generate({ label: this.label, scheme: 'ed25519', backend: 'file' }),
      );
      created = true;
    } catch (e) {
      if (!(e instanceof KeyError && e.code === 'key_exists')) throw e;
      key = await this.signer.describe(this.label);
    }
    if (created || !(await this.store.keys.get(key.label)))
      await this.store.keys.put(
        {
          label: key.label,
          backend: key.backend,
          scheme: key.scheme,
          fingerprint: key.fingerprint,
          publicKeySpki: key.publicKeySpki,
          createdAt: key.createdAt,
          disabled: key.disabled,
        },
        actor,
      );
    this.exportKeyP = Promise.resolve(key);
    return { key, created };
  }

  /** An exporter for the pipeline, scoped to one withdrawal / request. */
  exporter(scope: ExportScope): AirGapExporter {
    return {
      exportPrepared: (v) => this.exportPrepared(v, scope),
      exportTopology: (t) => this.exportTopology(t, scope),
    };
  }

  /**
   * Seals and records the onboarding topology of a party whose key is held
   * offline. Onboarding has no ledger deadline: the request gets a window of
   * `topologyWindowMs` (default 7 days).
   */
  async exportTopology(t: TopologyExport, scope: ExportScope): Promise<AwaitingSignature> {
    const hashes = t.messages.map((m) => bytesToHex(m));
    const repo = this.store.airGap;
    const same = await repo.currentForHashes(t.key.fingerprint, hashes);
    if (same) return this.sameRequest(same, { ...scope, subject: `onboarding:${t.partyId}` });
    await this.exportKey();
    const now = this.now();
    const request: AirGapRequest = {
      format: REQUEST_FORMAT,
      kind: 'topology-transactions',
      synchronizerId: t.synchronizerId,
      partyId: t.partyId,
      key: { fingerprint: t.key.fingerprint, scheme: t.key.scheme, publicKey: t.key.publicKeySpki },
      transactions: t.transactions,
      claimedHashes: hashes,
      expect: t.expect,
      window: {
        latest: new Date(now.getTime() + (this.opts.topologyWindowMs ?? 7 * 24 * 3600_000)).toISOString(),
        latestSource: 'air-gap onboarding request lifetime',
      },
      createdAt: now.toISOString(),
      nonce: newNonce(),
    };
    return this.record(request, hashes, {
      subject: `onboarding:${t.partyId}`,
      context: { flow: 'onboard', onboarding: t.onboarding, ...scope.context },
      ...(scope.actor ? { actor: scope.actor } : {}),
    });
  }

  /** Seals and records a request for `v`; an export already in play for the same hash is reused. */
  async exportPrepared(v: Verified, scope: ExportScope): Promise<AwaitingSignature> {
    const hash = bytesToHex(v.hash);
    const repo = this.store.airGap;
    const same = await repo.currentForHashes(v.party.fingerprint, [hash]);
    if (same) return this.sameRequest(same, scope);
    // Nothing changes unless the request can be sealed.
    await this.exportKey();
    // A new preparation supersedes the withdrawal's earlier request (its response would sign another hash).
    const cur = scope.withdrawalId ? await repo.currentFor(scope.withdrawalId) : undefined;
    const window = describeWindow(v.window);
    const request: AirGapRequest = {
      format: REQUEST_FORMAT,
      kind: 'prepared-transaction',
      synchronizerId: v.tx.metadata.synchronizerId,
      partyId: v.party.partyId,
      key: { fingerprint: v.party.fingerprint, scheme: v.party.scheme, publicKey: v.party.publicKeySpki },
      hashingScheme: v.scheme,
      preparedTransaction: Buffer.from(v.tx.bytes).toString('base64'),
      claimedHash: hash,
      intent: v.intent,
      commandId: v.tx.metadata.submitterInfo.commandId,
      window,
      createdAt: this.now().toISOString(),
      nonce: newNonce(),
    };
    return this.record(
      request,
      [hash],
      { ...scope, context: { flow: v.flow, ...scope.context } },
      cur ? { id: cur.id, details: { supersededBy: hash, reason: 'prepared again' } } : undefined,
    );
  }

  /** Seals `request` with the export key and records it as an open export. */
  private async record(
    request: AirGapRequest,
    hashes: string[],
    scope: ExportScope,
    supersedes?: { id: string; details: Record<string, Json> },
  ): Promise<AwaitingSignature> {
    const envelope = await sealRequest(request, this.signer, this.label);
    const x = await this.store.airGap.create(
      {
        nonce: request.nonce,
        digest: envelope.digest,
        kind: request.kind,
        party: request.partyId,
        keyFingerprint: request.key.fingerprint,
        hashes,
        ...(scope.withdrawalId ? { withdrawalId: scope.withdrawalId } : {}),
        subject: scope.subject,
        context: scope.context ?? {},
        envelope: envelope as unknown as Json,
        windowLatest: request.window.latest,
      },
      scope.actor,
      {
        ...(scope.lease !== undefined ? { lease: scope.lease } : {}),
        ...(supersedes ? { supersedes } : {}),
      },
    );
    return awaiting(x);
  }

  /**
   * Checks a response against the export it answers and records it (once).
   * Throws `AirGapError` naming what is wrong, after auditing the refusal
   * (`air-gap.import-refused`); a closed window makes the export stale (the
   * caller then prepares again and exports anew).
   */
  async importResponse(input: string | unknown, actor: string): Promise<ImportResult> {
    const seen: { nonce?: string; export?: ExportRecord } = {};
    try {
      return await this.checkAndImport(input, actor, seen);
    } catch (e) {
      if (e instanceof AirGapError)
        await this.store.airGap.importRefused(
          {
            ...seen,
            code: e.code,
            message: e.message,
            ...(e.field !== undefined ? { field: e.field } : {}),
          },
          actor,
        );
      throw e;
    }
  }

  private async checkAndImport(
    input: string | unknown,
    actor: string,
    seen: { nonce?: string; export?: ExportRecord },
  ): Promise<ImportResult> {
    const r = parseResponse(input);
    seen.nonce = r.nonce;
    const repo = this.store.airGap;
    const x = await repo.byNonce(r.nonce);
    if (x) seen.export = x;
    if (!x)
      throw new AirGapError(
        'unknown_request',
        'no request with this nonce was exported by this service',
        'response.nonce',
      );
    if (x.status === 'imported' || x.status === 'done')
      throw new AirGapError(
        'nonce_replayed',
        `the response to export ${x.id} was already imported (${x.importedAt ?? 'earlier'}); each is accepted once`,
        'response.nonce',
      );
    if (x.status === 'stale')
      throw new AirGapError(
        'window_closed',
        `export ${x.id} went stale (its window closed or the transaction was prepared again); sign the newer export`,
        'response.nonce',
      );
    if (x.status === 'cancelled')
      throw new AirGapError('unknown_request', `export ${x.id} was cancelled`, 'response.nonce');
    if (r.requestDigest !== x.digest)
      throw new AirGapError(
        'digest_mismatch',
        `the response answers request digest ${r.requestDigest}, but the request exported with this nonce has digest ${x.digest}`,
        'response.requestDigest',
      );
    if (r.partyId !== x.party)
      throw new AirGapError(
        'party_mismatch',
        `the response is for party ${r.partyId}, the request for ${x.party}`,
        'response.partyId',
      );
    if (r.hashes.length !== x.hashes.length || r.hashes.some((h, i) => h !== x.hashes[i]))
      throw new AirGapError(
        'hash_mismatch',
        `the response signs ${r.hashes.join(', ')}, the request asked for ${x.hashes.join(', ')}`,
        'response.hashes',
      );
    // The key every signature must verify against: the registered one, or — for an onboarding, before the
    // party exists — the key the request was exported for (the party id is in its namespace).
    const booked = await this.store.parties.get(x.party);
    const reqKey = (x.envelope as { request?: { key?: { scheme?: string; publicKey?: string } } }).request
      ?.key;
    const party =
      booked ??
      (x.kind === 'topology-transactions' && reqKey?.publicKey && reqKey.scheme && reqKey.scheme in SCHEMES
        ? {
            partyId: x.party,
            scheme: reqKey.scheme as keyof typeof SCHEMES,
            fingerprint: x.keyFingerprint,
            publicKeySpki: reqKey.publicKey,
          }
        : undefined);
    if (!party)
      throw new AirGapError(
        'party_mismatch',
        `party ${x.party} is not in this service's party book`,
        'response.partyId',
      );
    const spki = base64ToBytes(party.publicKeySpki, 'registered key');
    if (fingerprint(spki) !== x.keyFingerprint || party.fingerprint !== x.keyFingerprint)
      throw new AirGapError(
        'key_mismatch',
        `the registered key of ${x.party} is no longer the key the request was exported for`,
        'response.signerFingerprint',
      );
    if (r.signerFingerprint !== x.keyFingerprint)
      throw new AirGapError(
        'key_mismatch',
        `the response was signed by ${r.signerFingerprint}, not by the party's registered key ${x.keyFingerprint}`,
        'response.signerFingerprint',
      );
    const info = SCHEMES[party.scheme];
    r.signatures.forEach((s, i) => {
      const field = `response.signatures.${i}`;
      if (s.signedBy !== x.keyFingerprint)
        throw new AirGapError(
          'key_mismatch',
          `signature ${i} names signer ${s.signedBy}, not the registered key ${x.keyFingerprint}`,
          `${field}.signedBy`,
        );
      if (s.signingAlgorithmSpec !== info.algorithm || s.format !== info.format)
        throw new AirGapError(
          'signature_invalid',
          `signature ${i} is ${s.format} / ${s.signingAlgorithmSpec}; ${aKeyOf(party.scheme)} signs ${info.format} / ${info.algorithm}`,
          `${field}.${s.format !== info.format ? 'format' : 'signingAlgorithmSpec'}`,
        );
      let bytes: Uint8Array;
      try {
        bytes = base64ToBytes(s.signature, 'signature');
      } catch {
        bytes = new Uint8Array();
      }
      if (!verifySignature(party.scheme, spki, hexToBytes(x.hashes[i]!, 'hash'), bytes))
        throw new AirGapError(
          'signature_invalid',
          `signature ${i} does not verify over ${x.hashes[i]} against the registered key of ${x.party}`,
          `${field}.signature`,
        );
    });
    const now = this.now().getTime();
    const skew = this.opts.clockSkewMs ?? 300_000;
    const signedAt = Date.parse(r.signedAt);
    if (signedAt < Date.parse(x.createdAt) - skew || signedAt > now + skew)
      throw new AirGapError(
        'malformed',
        `the response says it was signed at ${r.signedAt}, outside the time between the export (${x.createdAt}) and now`,
        'response.signedAt',
      );
    if (Date.parse(x.windowLatest) <= now + (this.opts.importMarginMs ?? SUBMIT_MARGIN_MS)) {
      await repo.settle(x.id, 'stale', actor, { reason: 'window closed before import' });
      throw new AirGapError(
        'window_closed',
        `the window of export ${x.id} closes at ${x.windowLatest}: too late to submit; the transaction will be prepared again and a new request exported`,
        'response',
      );
    }
    const done = await repo.markImported(x.id, r as unknown as Json, actor);
    if (!done)
      throw new AirGapError(
        'nonce_replayed',
        `the response to export ${x.id} was imported concurrently; each is accepted once`,
        'response.nonce',
      );
    return { export: done, response: r };
  }

  /**
   * The same transaction (or topology) is already across the air gap: the
   * caller waits for that request when it is its own, and is refused when
   * it belongs to another withdrawal / request (an imported signature serves
   * only the flow it was exported for).
   */
  private sameRequest(x: ExportRecord, scope: ExportScope): AwaitingSignature {
    if (x.subject !== scope.subject)
      throw new Refusal(
        'bad_request',
        `this transaction is already across the air gap for ${x.subject} (export ${x.id}); it is signed and submitted only by that flow`,
        [],
        { export: x.id },
      );
    return awaiting(x);
  }

  /**
   * Runs `fn` with the imported signatures of export `id` available to the
   * cold key (and no other export's): the flow the export was made for — the
   * withdrawal's run, the import's own execution or onboarding — claims its
   * signature; any other flow presenting the same hash finds none.
   */
  withExport<T>(id: string, fn: () => Promise<T>): Promise<T> {
    return this.claim.run({ id, handedOut: false }, fn);
  }

  /**
   * Carries an imported response on: runs `fn` (the onboarding or execution
   * the export was made for) with its signatures claimed (`withExport`). When
   * `fn` fails, the failure is not the response's — the response was checked
   * in full on import — and the import is released, so that the same
   * response can be imported again once the cause is fixed, only when
   * nothing signed can have reached the ledger: the flow failed before it
   * took an imported signature, or the service it sent it to refused the
   * credentials (401/403: the request was not processed). Any other failure
   * after the signature was taken may follow a submission that commits; the
   * export stays `imported`, and `POST /v1/air-gap/exports/{id}/continue`
   * carries it on after looking for what was sent.
   */
  async carryOnImported<T>(x: ExportRecord, actor: string, fn: () => Promise<T>): Promise<T> {
    const claim = { id: x.id, handedOut: false };
    try {
      return await this.claim.run(claim, fn);
    } catch (e) {
      if (!claim.handedOut || isAccessDenied(e)) {
        const reason = e instanceof Refusal ? e.reason : isCantonApiError(e) ? 'upstream_error' : undefined;
        const message = isCantonApiError(e)
          ? upstreamSentence(e)
          : e instanceof Error
            ? e.message
            : String(e);
        await this.store.airGap.releaseImport(x.id, actor, {
          reason: reason ?? (e instanceof Error ? e.name : 'error'),
          message: message.slice(0, 1000),
        });
      }
      throw e;
    }
  }

  /** The offline key backend's source: the claimed export's imported signature of exactly `message`. */
  async signatureFor(key: { fingerprint: string }, message: Uint8Array): Promise<Uint8Array | undefined> {
    const claim = this.claim.getStore();
    if (claim === undefined) return undefined;
    const sig = await this.store.airGap.signatureFor(key.fingerprint, bytesToHex(message), claim.id);
    if (sig === undefined) return undefined;
    claim.handedOut = true;
    return base64ToBytes(sig, 'imported signature');
  }
}

function awaiting(x: ExportRecord): AwaitingSignature {
  return new AwaitingSignature(x.id, x.hashes, x.windowLatest);
}
