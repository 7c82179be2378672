/**
 * The signer contract: the only way the rest of canton-signer uses keys,
 * whichever backend holds them. Generate, import, list, describe, sign,
 * disable/enable and delete; every operation is asynchronous and safe to call
 * concurrently. `sign` returns Canton's signature object (Ledger API form) and
 * the hex form the validator's external-party endpoints take.
 *
 * Labels are unique across backends. Whether a key is disabled is kept in one
 * small state file in the keystore folder, for every backend. Cold keys (the
 * offline backend) are public keys only: they are registered with
 * `importPublicKey`, and signing with one returns the signature that came in
 * through the air gap for that exact hash, or fails with
 * `awaiting_offline_signature`.
 */
import { mkdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fingerprint, partyId } from '../hashing/canton-hash.js';
import { type BackendKey, type BackendKind, checkLabel, type KeyBackend, KeyError } from './backend.js';
import type { FileBackend, KeyFileProblem } from './file-backend.js';
import { type LockFileOptions, replaceFile, withLockFile } from './key-files.js';
import type { OfflineBackend } from './offline-backend.js';
import {
  isKeyScheme,
  type KeyScheme,
  SCHEMES,
  type SignatureFormat,
  type SigningAlgorithmSpec,
  type SigningKeySpec,
} from './schemes.js';

export interface KeyDescription {
  label: string;
  backend: BackendKind;
  scheme: KeyScheme;
  keySpec: SigningKeySpec;
  signingAlgorithmSpec: SigningAlgorithmSpec;
  signatureFormat: SignatureFormat;
  /** SubjectPublicKeyInfo DER. */
  publicKeySpki: Uint8Array;
  /** Ed25519: the 32-byte key; ECDSA: the uncompressed point 04 ‖ x ‖ y. */
  publicKeyRaw: Uint8Array;
  /** Canton fingerprint (namespace / signedBy), 68 hex characters. */
  fingerprint: string;
  createdAt: string;
  disabled: boolean;
  /** `hint::fingerprint`, when a party hint was given to `describe`. */
  partyIdPreview?: string;
}

/** Canton's `Signature` message in Ledger API JSON form. */
export interface CantonSignature {
  format: SignatureFormat;
  /** base64 */
  signature: string;
  signedBy: string;
  signingAlgorithmSpec: SigningAlgorithmSpec;
}

export interface SignOutput {
  signature: CantonSignature;
  /** The signature bytes in hex: what the validator's `/v0/admin/external-party/*` endpoints take (Ed25519). */
  signatureHex: string;
  bytes: Uint8Array;
  key: KeyDescription;
}

interface StateFile {
  version: 1;
  disabled: Record<string, { at: string; reason?: string }>;
  /** Keys deleted (by any process), so that other instances stop using cached copies. */
  deleted?: Record<string, { at: string }>;
}

export interface SignerOptions {
  file?: FileBackend;
  pkcs11?: KeyBackend;
  /** Cold keys: public keys registered here, private keys on an offline machine. */
  offline?: OfflineBackend;
  /** Folder for the key state file (default: the file backend's folder). */
  stateDir?: string;
  /** Waiting for and breaking the state file's lock (`key-state.json.lock`); tests shorten it. */
  stateLock?: LockFileOptions;
}

type KeyFlag = 'ok' | 'disabled' | 'deleted';

/**
 * The signer signs Canton hashes only: a 32-byte prepared-transaction hash, or
 * a 34-byte SHA-256 multihash (0x12 0x20 ‖ 32 bytes) of topology transactions.
 * Anything else would be a signature over bytes nobody has checked.
 */
function checkMessage(m: Uint8Array): void {
  if (m.length === 32) return;
  if (m.length === 34 && m[0] === 0x12 && m[1] === 0x20) return;
  throw new KeyError(
    'invalid_message',
    `refusing to sign ${m.length} bytes: only a 32-byte transaction hash or a 34-byte 1220… multihash is signed`,
  );
}

function flagIn(s: StateFile, label: string): KeyFlag {
  if (s.deleted !== undefined && Object.hasOwn(s.deleted, label)) return 'deleted';
  return Object.hasOwn(s.disabled, label) ? 'disabled' : 'ok';
}

export class Signer {
  private readonly backends: KeyBackend[];
  private readonly stateDir: string;
  private state: StateFile | undefined;
  private stateCheckedAt = 0;
  private stateMtime = -1;
  private stateWrite: Promise<void> = Promise.resolve();
  /** Mutations of one label (generate, import, delete) run one at a time. */
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Described keys by label, so that signing does not re-read key files. */
  private readonly cache = new Map<
    string,
    { backend: KeyBackend; key: BackendKey; description: KeyDescription }
  >();

  constructor(private readonly opts: SignerOptions) {
    this.backends = [opts.file, opts.pkcs11, opts.offline].filter((b): b is KeyBackend => b !== undefined);
    const dir = opts.stateDir ?? opts.file?.dir;
    if (!dir)
      throw new KeyError('backend_unavailable', 'the signer needs a folder for its key state (stateDir)');
    this.stateDir = dir;
  }

  backend(kind: BackendKind): KeyBackend {
    const b = kind === 'file' ? this.opts.file : kind === 'pkcs11' ? this.opts.pkcs11 : this.opts.offline;
    if (!b)
      throw new KeyError(
        'backend_unavailable',
        kind === 'pkcs11'
          ? 'no PKCS#11 backend configured (set CANTON_SIGNER_PKCS11_MODULE, CANTON_SIGNER_PKCS11_TOKEN and a PIN)'
          : kind === 'offline'
            ? 'no folder for offline (cold) public keys configured'
            : 'no file keystore configured',
      );
    return b;
  }

  /** The cold-key backend (public keys of keys held offline); `backend_unavailable` when not configured. */
  offline(): OfflineBackend {
    return this.backend('offline') as OfflineBackend;
  }

  /** Key files the last `list()` skipped because they could not be read (file keystore, offline keys). */
  keystoreProblems(): readonly KeyFileProblem[] {
    return [...(this.opts.file?.lastListProblems() ?? []), ...(this.opts.offline?.lastListProblems() ?? [])];
  }

  /** The configured backends and the schemes each can create and sign with. */
  async capabilities(): Promise<{ backend: BackendKind; schemes: KeyScheme[] }[]> {
    const out: { backend: BackendKind; schemes: KeyScheme[] }[] = [];
    for (const b of this.backends) out.push({ backend: b.kind, schemes: await b.schemes() });
    return out;
  }

  async generate(req: { label: string; scheme: KeyScheme; backend: BackendKind }): Promise<KeyDescription> {
    checkLabel(req.label);
    const backend = this.backend(req.backend);
    return this.locked(req.label, async () => {
      if (!isKeyScheme(req.scheme))
        throw new KeyError('unsupported_scheme', `unknown scheme ${String(req.scheme)}`);
      await this.refuseExisting(req.label);
      // The backend says why it cannot (an HSM names the missing mechanism).
      const key = await backend.generate(req.label, req.scheme);
      await this.clearTombstone(req.label);
      return this.remember(backend, key);
    });
  }

  /** Imports private key material into the file keystore. */
  async import(req: { label: string; material: Uint8Array | string }): Promise<KeyDescription> {
    checkLabel(req.label);
    const file = this.backend('file') as FileBackend;
    return this.locked(req.label, async () => {
      await this.refuseExisting(req.label);
      const key = await file.import(req.label, req.material);
      await this.clearTombstone(req.label);
      return this.remember(file, key);
    });
  }

  /**
   * Registers a cold key: its public key (SPKI DER of `scheme`), the private
   * key staying on the offline machine. The label must be free in every backend.
   */
  async importPublicKey(label: string, scheme: KeyScheme, spki: Uint8Array): Promise<KeyDescription> {
    checkLabel(label);
    const offline = this.offline();
    return this.locked(label, async () => {
      await this.refuseExisting(label);
      const key = await offline.importPublic(label, scheme, spki);
      await this.clearTombstone(label);
      return this.remember(offline, key);
    });
  }

  /**
   * Checks that every backend can use its keys (a file keystore's
   * passphrase opens its keys); throws the KeyError signing would. The
   * service runs it at start, so a wrong passphrase stops it there instead
   * of failing each withdrawal.
   */
  async checkAccess(): Promise<void> {
    for (const b of this.backends) await b.checkAccess?.();
  }

  async list(): Promise<KeyDescription[]> {
    const out: KeyDescription[] = [];
    for (const b of this.backends) for (const k of await b.list()) out.push(await this.describeKey(b, k));
    return out.sort((a, b) => (a.label < b.label ? -1 : a.label > b.label ? 1 : 0));
  }

  /** Whether a key has this label (in any backend); other failures throw. */
  async has(label: string): Promise<boolean> {
    return this.describe(label).then(
      () => true,
      (e: unknown) => {
        if (e instanceof KeyError && e.code === 'key_not_found') return false;
        throw e;
      },
    );
  }

  async describe(label: string, opts: { partyHint?: string } = {}): Promise<KeyDescription> {
    const { description } = await this.locate(label);
    const d = { ...description, disabled: await this.isDisabled(label) };
    if (opts.partyHint !== undefined) d.partyIdPreview = partyId(opts.partyHint, d.fingerprint);
    return d;
  }

  /**
   * Signs `message` (for Canton: a 32-byte prepared-transaction hash or a
   * 34-byte topology hash) with the key. Refuses disabled keys. For a cold
   * key the bytes are the signature imported through the air gap, unchanged
   * (the pipeline verifies them); `awaiting_offline_signature` when there is none.
   */
  async sign(label: string, message: Uint8Array): Promise<SignOutput> {
    checkMessage(message);
    // Common path without extra awaits: key already described, state checked within the last second.
    // The state first: refreshing it drops descriptions that another instance may have made stale.
    const flag = this.flagNow(label) ?? (await this.flag(label));
    if (flag === 'deleted') {
      this.cache.delete(label);
      throw new KeyError('key_not_found', `key ${label} was deleted`);
    }
    if (flag === 'disabled') throw new KeyError('key_disabled', `key ${label} is disabled`);
    const entry = this.cache.get(label) ?? (await this.locate(label));
    const { backend, key, description } = entry;
    const bytes = await backend.sign(key, message);
    const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return {
      signature: {
        format: description.signatureFormat,
        signature: buf.toString('base64'),
        signedBy: description.fingerprint,
        signingAlgorithmSpec: description.signingAlgorithmSpec,
      },
      signatureHex: buf.toString('hex'),
      bytes,
      key: description,
    };
  }

  async disable(label: string, reason?: string): Promise<void> {
    await this.locate(label);
    await this.updateState((s) => {
      s.disabled[label] = { at: new Date().toISOString(), ...(reason ? { reason } : {}) };
    });
  }

  async enable(label: string): Promise<void> {
    await this.locate(label);
    await this.updateState((s) => {
      delete s.disabled[label];
    });
  }

  /** Destroys the key in its backend. Irreversible. Other instances stop using it within a second. */
  async delete(label: string): Promise<void> {
    await this.locked(label, async () => {
      const { backend } = await this.locate(label);
      await backend.remove(label);
      this.cache.delete(label);
      await this.updateState((s) => {
        delete s.disabled[label];
        s.deleted ??= {};
        s.deleted[label] = { at: new Date().toISOString() };
      });
    });
  }

  async close(): Promise<void> {
    await this.stateWrite;
    for (const b of this.backends) await b.close();
  }

  // ---- internals -------------------------------------------------------------

  private async locked<T>(label: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(label) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => {});
    this.locks.set(label, tail);
    try {
      return await run;
    } finally {
      if (this.locks.get(label) === tail) this.locks.delete(label);
    }
  }

  private async clearTombstone(label: string): Promise<void> {
    const s = await this.loadState();
    if (s.deleted && Object.hasOwn(s.deleted, label))
      await this.updateState((st) => {
        if (st.deleted) delete st.deleted[label];
      });
  }

  private async refuseExisting(label: string): Promise<void> {
    for (const b of this.backends)
      if (await b.find(label))
        throw new KeyError('key_exists', `a key labelled ${label} already exists (${b.kind})`);
  }

  private async locate(
    label: string,
  ): Promise<{ backend: KeyBackend; key: BackendKey; description: KeyDescription }> {
    const hit = this.cache.get(label);
    if (hit) return hit;
    checkLabel(label);
    for (const b of this.backends) {
      const k = await b.find(label);
      if (k) {
        await this.remember(b, k);
        return this.cache.get(label)!;
      }
    }
    throw new KeyError('key_not_found', `no key labelled ${label}`);
  }

  private async remember(backend: KeyBackend, key: BackendKey): Promise<KeyDescription> {
    const description = await this.describeKey(backend, key);
    this.cache.set(key.label, { backend, key, description });
    return description;
  }

  private async describeKey(backend: KeyBackend, key: BackendKey): Promise<KeyDescription> {
    const info = SCHEMES[key.scheme];
    const spki = Buffer.from(key.spki);
    const raw =
      key.scheme === 'ed25519'
        ? spki.subarray(spki.length - 32)
        : spki.subarray(spki.length - (1 + 2 * info.fieldBytes));
    return {
      label: key.label,
      backend: backend.kind,
      scheme: key.scheme,
      keySpec: info.keySpec,
      signingAlgorithmSpec: info.algorithm,
      signatureFormat: info.format,
      publicKeySpki: new Uint8Array(spki),
      publicKeyRaw: new Uint8Array(raw),
      fingerprint: fingerprint(spki),
      createdAt: key.createdAt,
      disabled: await this.isDisabled(key.label),
    };
  }

  private statePath(): string {
    return join(this.stateDir, 'key-state.json');
  }

  private async loadState(): Promise<StateFile> {
    if (this.state) return this.state;
    const s = await this.readStateFile();
    this.state ??= s;
    return this.state;
  }

  /** The state file as it is on disk now (no cache). */
  private async readStateFile(): Promise<StateFile> {
    try {
      const parsed = JSON.parse(await readFile(this.statePath(), 'utf8')) as StateFile;
      if (parsed.version !== 1 || typeof parsed.disabled !== 'object' || parsed.disabled === null)
        throw new KeyError('invalid_key_file', `${this.statePath()} is not a canton-signer key state file`);
      return parsed;
    } catch (e) {
      if (e instanceof KeyError) throw e;
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
        throw new KeyError('keystore_io', `cannot read ${this.statePath()}: ${(e as Error).message}`);
      return { version: 1, disabled: {} };
    }
  }

  /** The key's flag when the state is fresh (checked within the last second); undefined otherwise. */
  private flagNow(label: string): KeyFlag | undefined {
    if (!this.state || Date.now() - this.stateCheckedAt > 1000) return undefined;
    return flagIn(this.state, label);
  }

  private async flag(label: string): Promise<KeyFlag> {
    await this.refreshState();
    return flagIn(await this.loadState(), label);
  }

  /**
   * Another process (the CLI, a second instance) may disable a key: the state
   * file's mtime is re-checked at most once a second, so a disable takes
   * effect everywhere within a second without a file read per signature.
   */
  private async refreshState(): Promise<void> {
    const now = Date.now();
    if (now - this.stateCheckedAt <= 1000) return;
    this.stateCheckedAt = now;
    const mtime = await stat(this.statePath()).then(
      (st) => st.mtimeMs,
      () => 0,
    );
    if (mtime !== this.stateMtime) {
      this.stateMtime = mtime;
      this.state = undefined;
      // Keys may have been deleted or replaced elsewhere: describe them afresh.
      this.cache.clear();
    }
  }

  private async isDisabled(label: string): Promise<boolean> {
    return (await this.flag(label)) === 'disabled';
  }

  /**
   * Read-modify-write of the state file: serialised within this process, and
   * across processes (the service, the CLI, other instances) by a lock file
   * next to it, under which the file is read afresh; replaced atomically and
   * durably on disk.
   */
  private updateState(change: (s: StateFile) => void): Promise<void> {
    const run = async () => {
      try {
        await mkdir(this.stateDir, { recursive: true, mode: 0o700 });
      } catch (e) {
        throw new KeyError('keystore_io', `cannot create ${this.stateDir}: ${(e as Error).message}`);
      }
      await withLockFile(
        `${this.statePath()}.lock`,
        async () => {
          const s = await this.readStateFile();
          change(s);
          try {
            await replaceFile(this.stateDir, this.statePath(), `${JSON.stringify(s, null, 2)}\n`);
          } catch (e) {
            throw new KeyError('keystore_io', `cannot write ${this.statePath()}: ${(e as Error).message}`);
          }
          this.state = s;
          this.stateCheckedAt = 0;
        },
        this.opts.stateLock,
      );
    };
    const next = this.stateWrite.then(run, run);
    this.stateWrite = next.catch(() => {});
    return next;
  }
}
