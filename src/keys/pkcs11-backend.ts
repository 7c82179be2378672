/**
 * The PKCS#11 key backend: keys are generated inside a token (an HSM, or
 * SoftHSM2 in tests) as persistent, sensitive, non-extractable key pairs, and
 * every signature is made by the token.
 *
 * - Start-up: load the module, C_Initialize (OS locking, so that the session
 *   pool can sign on several libuv threads at once), find the token by label
 *   (or slot id), probe its mechanisms, open a pool of sessions and log in
 *   once. The PIN is never retried after the token refuses it, and it never
 *   appears in an error message.
 * - Keys: a private key and its public key share a label and a random 16-byte
 *   CKA_ID. A key's scheme comes from CKK_* and CKA_EC_PARAMS. Tokens do not
 *   record when a key was made: we set CKA_START_DATE to the day of
 *   generation and report that day (midnight UTC) as `createdAt`, or '' when
 *   a key has no start date (e.g. made by another tool).
 * - Signing: Ed25519 with CKM_EDDSA over the message; ECDSA with
 *   CKM_ECDSA_SHA256 / CKM_ECDSA_SHA384 over the message when the token has
 *   them, else CKM_ECDSA over SHA-256 / SHA-384 of the message computed here
 *   (SoftHSM 2.6 has no CKM_ECDSA_SHA256). The token's r‖s becomes DER.
 * - Recovery: when a call fails because the session, the login, the device or
 *   the library state is gone (a session that is no longer logged in sees no
 *   private keys, so "not found" is only believed from a logged-in session),
 *   the pool is closed once calls in flight have returned, the token is found
 *   again by label (a re-initialised token may sit in a new slot; if it cannot
 *   be found the library is finalised and initialised again), the sessions are
 *   reopened, the PIN is given again, and the call is retried once. A refused
 *   PIN stops the backend: it is not tried again.
 *
 * Several backends in one process may use the same module: they share one
 * loaded library (PKCS#11 state is per process), which is finalised when the
 * last of them closes.
 *
 * This file keeps the backend's state: the session pool, login and recovery.
 * Beside it in src/keys/pkcs11/: the settings (config.ts), the loaded module and
 * its errors (library.ts), mechanisms and encodings (mechanisms.ts), and the
 * stateless reading of the token's slots and objects (objects.ts).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Mechanism, Template } from 'pkcs11js';
import { type BackendKey, checkLabel, type KeyBackend, KeyError } from './backend.js';
import { PKCS11_PIN } from './passphrase.js';
import type { Pkcs11Config } from './pkcs11/config.js';
import {
  CKR_CODES,
  ckrName,
  finalize,
  initialize,
  keyErrorOf,
  loadLibrary,
  PIN_DIGEST_KEY,
  pkcs11js,
  RECOVERABLE,
  type SharedLibrary,
} from './pkcs11/library.js';
import { type Plan, planFor, today } from './pkcs11/mechanisms.js';
import {
  attribute,
  checkProtected,
  describeKey,
  destroyQuietly,
  findObjects,
  initializedTokens,
  locateToken,
  lookupKey,
  requireLogin,
  type TokenKey,
  type TokenRef,
} from './pkcs11/objects.js';
import { KEY_SCHEMES, type KeyScheme, prehash, rawEcdsaToDer, SCHEMES } from './schemes.js';

export { type Pkcs11Config, pkcs11ConfigFromEnv } from './pkcs11/config.js';
export { ckrName } from './pkcs11/library.js';

interface Session {
  handle: Buffer;
  /** Pool generation: sessions of an earlier generation are closed, never reused. */
  generation: number;
  epoch: number;
}

/** How long recovery and close() wait for calls in flight before closing their sessions. */
const DRAIN_MS = 10_000;

export class Pkcs11Backend implements KeyBackend {
  readonly kind = 'pkcs11' as const;
  #pin: string;
  private readonly poolSize: number;
  /** How to find the token again: by label once it has been seen (its slot id may change). */
  private want: { label?: string; slot?: number };
  private slot: Buffer | undefined;
  private tokenLabel: string;
  private mechanisms: ReadonlySet<number> = new Set();
  private generation = 0;
  private sessions: Session[] = [];
  private free: Session[] = [];
  private waiters: { resolve: (s: Session) => void; reject: (e: unknown) => void }[] = [];
  private inUse = 0;
  private idleWaiters: (() => void)[] = [];
  private recovering: Promise<void> | undefined;
  /** No sessions: the next call reconnects. */
  private down = false;
  /** The token refused the PIN: nothing is tried again. */
  private fatal: KeyError | undefined;
  private closed = false;
  /** Private key handles by label (object handles are valid in every session of the process). */
  private readonly handles = new Map<string, { handle: Buffer; spki: Buffer; generation: number }>();
  /** generate() and remove() one at a time, so a label cannot be taken twice. */
  private exclusiveTail: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly shared: SharedLibrary,
    config: Pkcs11Config,
    poolSize: number,
  ) {
    this.#pin = config.pin;
    this.poolSize = poolSize;
    this.want = { label: config.token, slot: config.slot };
    this.tokenLabel = config.token ?? (config.slot !== undefined ? `slot ${config.slot}` : '');
  }

  /** Loads the module, finds the token, opens the session pool and logs in. */
  static async open(config: Pkcs11Config): Promise<Pkcs11Backend> {
    if (!config.pin)
      throw new KeyError('no_pin', `no PKCS#11 PIN: set ${PKCS11_PIN.env} or ${PKCS11_PIN.fileEnv}`);
    const size = config.sessions ?? 4;
    if (!Number.isInteger(size) || size < 1 || size > 64)
      throw new KeyError('backend_unavailable', 'the PKCS#11 session pool size must be from 1 to 64');
    const shared = loadLibrary(config.module);
    shared.users++;
    const backend = new Pkcs11Backend(shared, config, size);
    try {
      if (!shared.initialized) initialize(shared);
      backend.connect();
    } catch (e) {
      const err = backend.keyError(e, 'opening the token');
      backend.closed = true;
      backend.releaseLibrary();
      throw err;
    }
    // Found by label from now on, unless the label does not tell tokens apart.
    if (backend.tokenLabel !== '' && backend.labelIsUnique()) backend.want = { label: backend.tokenLabel };
    return backend;
  }

  /** The module and the token, for the object helpers (src/keys/pkcs11/objects.ts). */
  private get ref(): TokenRef {
    return { lib: this.shared.lib, label: this.tokenLabel };
  }

  /** The token's label. */
  get token(): string {
    return this.tokenLabel;
  }

  async schemes(): Promise<KeyScheme[]> {
    return KEY_SCHEMES.filter((s) => planFor(s, this.mechanisms).plan !== undefined);
  }

  async generate(label: string, scheme: KeyScheme): Promise<BackendKey> {
    checkLabel(label);
    if (!KEY_SCHEMES.includes(scheme))
      throw new KeyError('unsupported_scheme', `unknown scheme ${JSON.stringify(String(scheme))}`);
    this.plan(scheme);
    const id = randomBytes(16);
    return this.exclusive(() =>
      this.run(`generating ${scheme} key "${label}"`, async (session) => {
        const plan = this.plan(scheme);
        const lib = this.shared.lib;
        requireLogin(this.ref, session);
        const taken = findObjects(this.ref, session, [{ type: pkcs11js.CKA_LABEL, value: label }]);
        if (taken.length > 0) {
          // A retry after a lost session may find the pair the first attempt made.
          const mine = lookupKey(this.ref, session, label);
          if (mine?.id.equals(id)) return this.remember(mine);
          throw new KeyError(
            'key_exists',
            `a key labelled "${label}" already exists on token "${this.tokenLabel}"`,
          );
        }
        const date = today();
        const common: Template = [
          { type: pkcs11js.CKA_TOKEN, value: true },
          { type: pkcs11js.CKA_LABEL, value: label },
          { type: pkcs11js.CKA_ID, value: id },
          { type: pkcs11js.CKA_KEY_TYPE, value: plan.keyType },
          { type: pkcs11js.CKA_START_DATE, value: date },
          { type: pkcs11js.CKA_DERIVE, value: false },
        ];
        const publicTemplate: Template = [
          ...common,
          { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PUBLIC_KEY },
          { type: pkcs11js.CKA_PRIVATE, value: false },
          { type: pkcs11js.CKA_VERIFY, value: true },
          { type: pkcs11js.CKA_EC_PARAMS, value: SCHEMES[scheme].ecParams },
        ];
        const privateTemplate: Template = [
          ...common,
          { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
          { type: pkcs11js.CKA_PRIVATE, value: true },
          { type: pkcs11js.CKA_SENSITIVE, value: true },
          { type: pkcs11js.CKA_EXTRACTABLE, value: false },
          { type: pkcs11js.CKA_SIGN, value: true },
        ];
        const mechanism: Mechanism = { mechanism: plan.generate };
        const pair = await lib.C_GenerateKeyPairAsync(session, mechanism, publicTemplate, privateTemplate);
        try {
          checkProtected(this.ref, session, pair.privateKey);
          const key = describeKey(this.ref, session, pair.privateKey);
          if (!key || key.scheme !== scheme || !key.id.equals(id))
            throw new KeyError('hsm_error', `token "${this.tokenLabel}" did not keep the key's attributes`);
          return this.remember(key);
        } catch (e) {
          for (const h of [pair.privateKey, pair.publicKey]) destroyQuietly(this.ref, session, h);
          throw e;
        }
      }),
    );
  }

  async find(label: string): Promise<BackendKey | undefined> {
    checkLabel(label);
    return this.run(`looking up "${label}"`, async (session) => {
      const key = lookupKey(this.ref, session, label);
      return key && this.remember(key);
    });
  }

  async list(): Promise<BackendKey[]> {
    return this.run('listing keys', async (session) => {
      requireLogin(this.ref, session);
      const out: BackendKey[] = [];
      for (const handle of findObjects(this.ref, session, [
        { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
      ])) {
        let key: TokenKey | undefined;
        try {
          key = describeKey(this.ref, session, handle);
          if (key) checkLabel(key.label);
        } catch (e) {
          if (e instanceof KeyError) continue; // not a key canton-signer can use
          throw e;
        }
        if (key) out.push(this.remember(key));
      }
      return out.sort((a, b) => (a.label < b.label ? -1 : a.label > b.label ? 1 : 0));
    });
  }

  async sign(key: BackendKey, message: Uint8Array): Promise<Uint8Array> {
    const data = Buffer.from(message);
    return this.run(`signing with "${key.label}"`, async (session) => {
      const plan = this.plan(key.scheme);
      const input = plan.hostHash ? Buffer.from(prehash(key.scheme, data)) : data;
      if (input.length === 0)
        // Not a Canton message; SoftHSM answers CKR_ARGUMENTS_BAD and leaves the operation active.
        throw new KeyError(
          'hsm_error',
          `token "${this.tokenLabel}" cannot be given an empty message to sign`,
        );
      let handle = this.keyHandle(session, key);
      let out: Buffer;
      try {
        out = await this.signWith(session, plan.sign, handle, input);
      } catch (e) {
        const name = ckrName(e);
        if (name !== 'CKR_KEY_HANDLE_INVALID' && name !== 'CKR_OBJECT_HANDLE_INVALID') throw e;
        // The object went away under a cached handle: find it again (or say it is gone).
        this.handles.delete(key.label);
        handle = this.keyHandle(session, key);
        out = await this.signWith(session, plan.sign, handle, input);
      }
      if (key.scheme === 'ed25519') {
        if (out.length !== 64)
          throw new KeyError('hsm_error', `token returned a ${out.length}-byte Ed25519 signature`);
        return new Uint8Array(out);
      }
      if (out.length !== 2 * SCHEMES[key.scheme].fieldBytes)
        throw new KeyError('hsm_error', `token returned an ${key.scheme} signature of ${out.length} bytes`);
      return new Uint8Array(rawEcdsaToDer(out));
    });
  }

  async remove(label: string): Promise<void> {
    checkLabel(label);
    let destroyed = false;
    return this.exclusive(() =>
      this.run(`removing "${label}"`, async (session) => {
        const lib = this.shared.lib;
        const privates = findObjects(this.ref, session, [
          { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
          { type: pkcs11js.CKA_LABEL, value: label },
        ]);
        if (privates.length === 0) {
          requireLogin(this.ref, session);
          if (destroyed) return; // a retry after the first attempt had destroyed it
          throw new KeyError('key_not_found', `no key labelled "${label}" on token "${this.tokenLabel}"`);
        }
        this.handles.delete(label);
        const publics = findObjects(this.ref, session, [
          { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PUBLIC_KEY },
          { type: pkcs11js.CKA_LABEL, value: label },
        ]);
        for (const p of privates) {
          const id = attribute(this.ref, session, p, pkcs11js.CKA_ID);
          if (id && id.length > 0)
            publics.push(
              ...findObjects(this.ref, session, [
                { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PUBLIC_KEY },
                { type: pkcs11js.CKA_ID, value: id },
              ]),
            );
        }
        const seen = new Set<string>();
        for (const h of [...publics, ...privates]) {
          if (seen.has(h.toString('hex'))) continue;
          seen.add(h.toString('hex'));
          lib.C_DestroyObject(session, h);
          destroyed = true;
        }
      }),
    );
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const err = new KeyError('backend_unavailable', 'the PKCS#11 backend is closed');
    for (const w of this.waiters.splice(0)) w.reject(err);
    await this.recovering?.catch(() => undefined);
    await this.idle(DRAIN_MS);
    const last = this.shared.users === 1;
    const first = this.sessions[0];
    if (last && first && first.epoch === this.shared.epoch && this.shared.initialized) {
      try {
        this.shared.lib.C_Logout(first.handle);
      } catch {
        // not logged in any more
      }
    }
    this.closeSessions(this.sessions);
    this.sessions = [];
    this.free = [];
    this.handles.clear();
    this.#pin = '';
    this.releaseLibrary();
  }

  // ---- sessions, login, recovery ------------------------------------------------------------

  private releaseLibrary(): void {
    this.shared.users--;
    if (this.shared.users === 0 && this.shared.initialized) finalize(this.shared);
  }

  /** Runs `op` on a pooled session; reconnects and retries once when the session or the token went away. */
  private async run<T>(what: string, op: (session: Buffer) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      // Fast path: a free session in a healthy pool is taken without waiting on a promise.
      const ready =
        !this.closed && !this.fatal && !this.recovering && !this.down ? this.free.pop() : undefined;
      if (ready) this.inUse++;
      const session = ready ?? (await this.acquire());
      let result: T;
      try {
        result = await op(session.handle);
      } catch (e) {
        const name = ckrName(e);
        const recoverable = name !== undefined && RECOVERABLE.has(name);
        if (recoverable) this.release(session, true);
        else {
          // The module failed the call: the session may be left mid-operation (SoftHSM keeps a
          // sign operation active after CKR_ARGUMENTS_BAD), so it is swapped for a fresh one.
          if (name !== undefined) this.renew(session);
          this.release(session, false);
          throw this.keyError(e, what);
        }
        if (attempt > 0)
          throw new KeyError(
            'hsm_error',
            `${what} failed again after reconnecting to token "${this.tokenLabel}" (${name})`,
          );
        await this.recover(session.generation);
        continue;
      }
      this.release(session, false);
      return result;
    }
  }

  private async acquire(): Promise<Session> {
    for (;;) {
      if (this.closed) throw new KeyError('backend_unavailable', 'the PKCS#11 backend is closed');
      if (this.fatal) throw this.fatal;
      if (this.recovering) {
        await this.recovering;
        continue;
      }
      if (this.down) {
        await this.recover(this.generation);
        continue;
      }
      const s = this.free.pop();
      if (s) {
        this.inUse++;
        return s;
      }
      return new Promise<Session>((resolve, reject) => {
        this.waiters.push({ resolve, reject });
      });
    }
  }

  /** Replaces a pooled session in place; the old one is closed after the new one opens (keeping the login). */
  private renew(s: Session): void {
    if (this.closed || s.generation !== this.generation || !this.slot) return;
    const lib = this.shared.lib;
    try {
      const handle = lib.C_OpenSession(this.slot, pkcs11js.CKF_RW_SESSION | pkcs11js.CKF_SERIAL_SESSION);
      const old = s.handle;
      s.handle = handle;
      s.epoch = this.shared.epoch;
      lib.C_CloseSession(old);
    } catch {
      // Keep the session: if it is unusable, the next call on it reconnects.
    }
  }

  private release(s: Session, discard: boolean): void {
    this.inUse--;
    if (!discard && !this.closed && s.generation === this.generation) this.handOut(s);
    if (this.inUse === 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  private handOut(s: Session): void {
    const w = this.waiters.shift();
    if (w) {
      this.inUse++;
      w.resolve(s);
    } else this.free.push(s);
  }

  /** Resolves when no call holds a session (or after `ms`, for a call that hangs in the module). */
  private idle(ms: number): Promise<void> {
    if (this.inUse === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** One reconnection at a time; a call that failed on an older pool just retries. */
  private recover(failedGeneration: number): Promise<void> {
    if (this.recovering) return this.recovering;
    if (this.fatal) return Promise.reject(this.fatal);
    if (failedGeneration !== this.generation) return Promise.resolve();
    this.recovering = this.reconnect().finally(() => {
      this.recovering = undefined;
    });
    return this.recovering;
  }

  private async reconnect(): Promise<void> {
    this.generation++;
    this.handles.clear();
    const old = this.sessions;
    this.sessions = [];
    this.free = [];
    await this.idle(DRAIN_MS);
    this.closeSessions(old);
    try {
      if (this.closed) throw new KeyError('backend_unavailable', 'the PKCS#11 backend is closed');
      try {
        if (!this.shared.initialized) initialize(this.shared);
        this.connect();
      } catch (e) {
        const code = e instanceof KeyError ? e.code : CKR_CODES[ckrName(e) ?? ''];
        if (code === 'wrong_pin' || code === 'pin_locked') throw e;
        // The token may be in a new slot (deleted and made again) or the library state lost:
        // start the library afresh and look again.
        finalize(this.shared);
        initialize(this.shared);
        this.connect();
      }
      this.down = false;
    } catch (e) {
      const err = this.keyError(e, 'reconnecting to the token');
      this.down = true;
      if (err.code === 'wrong_pin' || err.code === 'pin_locked') this.fatal = err;
      for (const w of this.waiters.splice(0)) w.reject(err);
      throw err;
    }
  }

  /** Finds the token, probes it, opens the pool and logs in; the new sessions go to waiting calls. */
  private connect(): void {
    const lib = this.shared.lib;
    const { slot, label } = locateToken(this.shared.lib, this.shared.path, this.want);
    this.tokenLabel = label;
    const mechanisms = new Set(lib.C_GetMechanismList(slot));
    const sessions: Session[] = [];
    try {
      for (let i = 0; i < this.poolSize; i++) {
        try {
          const handle = lib.C_OpenSession(slot, pkcs11js.CKF_RW_SESSION | pkcs11js.CKF_SERIAL_SESSION);
          sessions.push({ handle, generation: this.generation, epoch: this.shared.epoch });
        } catch (e) {
          // A token with fewer sessions than asked for gets a smaller pool.
          if (i > 0 && ckrName(e) === 'CKR_SESSION_COUNT') break;
          throw e;
        }
      }
      this.login(sessions[0]!.handle, slot);
    } catch (e) {
      this.closeSessions(sessions);
      throw e;
    }
    this.slot = slot;
    this.mechanisms = mechanisms;
    this.sessions = sessions;
    for (const s of sessions) this.handOut(s);
  }

  private labelIsUnique(): boolean {
    try {
      return initializedTokens(this.shared.lib).filter((t) => t.label === this.tokenLabel).length === 1;
    } catch {
      return false;
    }
  }

  /** Logs in once; a refused PIN is never tried again. */
  private login(session: Buffer, slot: Buffer): void {
    const slotKey = slot.toString('hex');
    const digest = createHmac('sha256', PIN_DIGEST_KEY).update(this.#pin).digest();
    try {
      this.shared.lib.C_Login(session, pkcs11js.CKU_USER, this.#pin);
    } catch (e) {
      if (ckrName(e) !== 'CKR_USER_ALREADY_LOGGED_IN') throw e;
      // Another backend of this process logged in already: the PIN must still be the right one.
      const known = this.shared.logins.get(slotKey);
      if (known && !timingSafeEqual(known, digest))
        throw new KeyError(
          'wrong_pin',
          `token "${this.tokenLabel}" is logged in with a different PIN than the one configured`,
        );
      return;
    }
    this.shared.logins.set(slotKey, digest);
  }

  private closeSessions(sessions: Session[]): void {
    if (!this.shared.initialized) return;
    for (const s of sessions) {
      // A session of an earlier library epoch is gone already, and its number may be someone else's now.
      if (s.epoch !== this.shared.epoch) continue;
      try {
        this.shared.lib.C_CloseSession(s.handle);
      } catch {
        // closed already
      }
    }
  }

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.exclusiveTail.then(fn, fn);
    this.exclusiveTail = run.catch(() => undefined);
    return run;
  }

  // ---- objects ------------------------------------------------------------------------------

  private plan(scheme: KeyScheme): Plan {
    const { plan, missing } = planFor(scheme, this.mechanisms);
    if (!plan)
      throw new KeyError(
        'mechanism_missing',
        `token "${this.tokenLabel}" cannot do ${scheme}: it lacks ${missing.join(', ')}`,
      );
    return plan;
  }

  private remember(key: TokenKey): BackendKey {
    this.handles.set(key.label, { handle: key.privateKey, spki: key.spki, generation: this.generation });
    return { label: key.label, scheme: key.scheme, spki: new Uint8Array(key.spki), createdAt: key.createdAt };
  }

  /** The private key handle for `key`, checked to be the same key (same public key) as asked for. */
  private keyHandle(session: Buffer, key: BackendKey): Buffer {
    const cached = this.handles.get(key.label);
    if (cached && cached.generation === this.generation && cached.spki.equals(key.spki)) return cached.handle;
    const found = lookupKey(this.ref, session, key.label);
    if (!found)
      throw new KeyError('key_not_found', `no key labelled "${key.label}" on token "${this.tokenLabel}"`);
    if (found.scheme !== key.scheme || !found.spki.equals(key.spki))
      throw new KeyError(
        'public_key_mismatch',
        `the key labelled "${key.label}" on token "${this.tokenLabel}" is not the key asked for (its public key differs)`,
      );
    this.remember(found);
    return found.privateKey;
  }

  private async signWith(session: Buffer, mechanism: number, key: Buffer, input: Buffer): Promise<Buffer> {
    const lib = this.shared.lib;
    lib.C_SignInit(session, { mechanism }, key);
    // Uninitialised is fine: the result is the slice the module wrote, and it is copied by the caller.
    return lib.C_SignAsync(session, input, Buffer.allocUnsafe(512));
  }

  /** Any failure as a KeyError naming the operation, the token and the CKR code; never the PIN. */
  private keyError(e: unknown, what: string): KeyError {
    return keyErrorOf(e, what, this.tokenLabel, this.#pin);
  }
}
