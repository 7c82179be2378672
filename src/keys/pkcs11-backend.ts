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
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Mechanism, Template } from 'pkcs11js';
import { type BackendKey, checkLabel, type KeyBackend, KeyError } from './backend.js';
import { PKCS11_PIN, secretFromEnv } from './passphrase.js';
import {
  CKR_CODES,
  ckrName,
  finalize,
  firstLine,
  initialize,
  loadLibrary,
  NotLoggedIn,
  PIN_DIGEST_KEY,
  pkcs11js,
  RECOVERABLE,
  type SharedLibrary,
} from './pkcs11/library.js';
import {
  CKK_EC,
  CKK_EC_EDWARDS,
  CKS_RO_USER_FUNCTIONS,
  CKS_RW_USER_FUNCTIONS,
  isoDate,
  type Plan,
  planFor,
  rawPublicKey,
  schemeOf,
  today,
  ulong,
} from './pkcs11/mechanisms.js';
import { KEY_SCHEMES, type KeyScheme, prehash, rawEcdsaToDer, SCHEMES, spkiFromRaw } from './schemes.js';

export { ckrName } from './pkcs11/library.js';

export interface Pkcs11Config {
  /** Path of the PKCS#11 module (shared library). */
  module: string;
  /** Token label. */
  token?: string;
  /** Slot id (when there is no label, or to choose among tokens with the same label). */
  slot?: number;
  pin: string;
  /** Sessions in the pool: how many signatures the token is asked for at once (default 4). */
  sessions?: number;
}

/**
 * The PKCS#11 configuration from the environment: CANTON_SIGNER_PKCS11_MODULE,
 * CANTON_SIGNER_PKCS11_TOKEN (label) and/or CANTON_SIGNER_PKCS11_SLOT,
 * CANTON_SIGNER_PKCS11_SESSIONS, and the PIN from CANTON_SIGNER_PKCS11_PIN or
 * the file named by CANTON_SIGNER_PKCS11_PIN_FILE. Undefined when no module is
 * configured.
 */
export function pkcs11ConfigFromEnv(env: NodeJS.ProcessEnv = process.env): Pkcs11Config | undefined {
  const module = env.CANTON_SIGNER_PKCS11_MODULE;
  if (module === undefined || module === '') return undefined;
  const pin = secretFromEnv(PKCS11_PIN, env);
  if (pin === undefined)
    throw new KeyError(
      'no_pin',
      `a PKCS#11 module is configured but no PIN: set ${PKCS11_PIN.env} or ${PKCS11_PIN.fileEnv}`,
    );
  const config: Pkcs11Config = { module, pin };
  const token = env.CANTON_SIGNER_PKCS11_TOKEN;
  if (token !== undefined && token !== '') config.token = token;
  const slot = env.CANTON_SIGNER_PKCS11_SLOT;
  if (slot !== undefined && slot !== '') {
    if (!/^(?:\d{1,15}|0x[0-9a-fA-F]{1,12})$/.test(slot))
      throw new KeyError('token_not_found', 'CANTON_SIGNER_PKCS11_SLOT must be a slot id (a number)');
    config.slot = Number(slot);
  }
  const sessions = env.CANTON_SIGNER_PKCS11_SESSIONS;
  if (sessions !== undefined && sessions !== '') {
    if (!/^\d{1,3}$/.test(sessions))
      throw new KeyError(
        'backend_unavailable',
        'CANTON_SIGNER_PKCS11_SESSIONS must be a number from 1 to 64',
      );
    config.sessions = Number(sessions);
  }
  return config;
}

interface Session {
  handle: Buffer;
  /** Pool generation: sessions of an earlier generation are closed, never reused. */
  generation: number;
  epoch: number;
}

interface TokenKey {
  label: string;
  scheme: KeyScheme;
  spki: Buffer;
  createdAt: string;
  privateKey: Buffer;
  id: Buffer;
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
        this.requireLogin(session);
        const taken = this.findObjects(session, [{ type: pkcs11js.CKA_LABEL, value: label }]);
        if (taken.length > 0) {
          // A retry after a lost session may find the pair the first attempt made.
          const mine = this.lookup(session, label);
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
          this.checkProtected(session, pair.privateKey);
          const key = this.describe(session, pair.privateKey);
          if (!key || key.scheme !== scheme || !key.id.equals(id))
            throw new KeyError('hsm_error', `token "${this.tokenLabel}" did not keep the key's attributes`);
          return this.remember(key);
        } catch (e) {
          for (const h of [pair.privateKey, pair.publicKey]) this.destroyQuietly(session, h);
          throw e;
        }
      }),
    );
  }

  async find(label: string): Promise<BackendKey | undefined> {
    checkLabel(label);
    return this.run(`looking up "${label}"`, async (session) => {
      const key = this.lookup(session, label);
      return key && this.remember(key);
    });
  }

  async list(): Promise<BackendKey[]> {
    return this.run('listing keys', async (session) => {
      this.requireLogin(session);
      const out: BackendKey[] = [];
      for (const handle of this.findObjects(session, [
        { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
      ])) {
        let key: TokenKey | undefined;
        try {
          key = this.describe(session, handle);
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
        const privates = this.findObjects(session, [
          { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
          { type: pkcs11js.CKA_LABEL, value: label },
        ]);
        if (privates.length === 0) {
          this.requireLogin(session);
          if (destroyed) return; // a retry after the first attempt had destroyed it
          throw new KeyError('key_not_found', `no key labelled "${label}" on token "${this.tokenLabel}"`);
        }
        this.handles.delete(label);
        const publics = this.findObjects(session, [
          { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PUBLIC_KEY },
          { type: pkcs11js.CKA_LABEL, value: label },
        ]);
        for (const p of privates) {
          const id = this.attribute(session, p, pkcs11js.CKA_ID);
          if (id && id.length > 0)
            publics.push(
              ...this.findObjects(session, [
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
    const { slot, label } = this.locate();
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

  private tokens(): { slot: Buffer; id: number; label: string; flags: number }[] {
    const lib = this.shared.lib;
    const out: { slot: Buffer; id: number; label: string; flags: number }[] = [];
    for (const slot of lib.C_GetSlotList(true)) {
      let info: { label: string; flags: number };
      try {
        info = lib.C_GetTokenInfo(slot);
      } catch (e) {
        if (ckrName(e) === 'CKR_CRYPTOKI_NOT_INITIALIZED') throw e;
        continue; // a token going away
      }
      if ((info.flags & pkcs11js.CKF_TOKEN_INITIALIZED) === 0) continue;
      out.push({ slot, id: ulong(slot), label: info.label.replace(/[\s\0]+$/, ''), flags: info.flags });
    }
    return out;
  }

  private labelIsUnique(): boolean {
    try {
      return this.tokens().filter((t) => t.label === this.tokenLabel).length === 1;
    } catch {
      return false;
    }
  }

  private locate(): { slot: Buffer; label: string } {
    const { label, slot } = this.want;
    const tokens = this.tokens();
    const matches = tokens.filter(
      (t) => (label === undefined || t.label === label) && (slot === undefined || t.id === slot),
    );
    const wanted =
      label !== undefined && slot !== undefined
        ? `labelled "${label}" in slot ${slot}`
        : label !== undefined
          ? `labelled "${label}"`
          : slot !== undefined
            ? `in slot ${slot}`
            : '(none named: set CANTON_SIGNER_PKCS11_TOKEN)';
    const present = tokens.map((t) => `"${t.label}" (slot ${t.id})`).join(', ') || 'none';
    if (matches.length !== 1)
      throw new KeyError(
        'token_not_found',
        matches.length === 0
          ? `no initialised PKCS#11 token ${wanted} in ${this.shared.path}; tokens present: ${present}`
          : `${matches.length} PKCS#11 tokens match ${wanted === '(none named: set CANTON_SIGNER_PKCS11_TOKEN)' ? 'an unnamed token' : wanted}; name one (CANTON_SIGNER_PKCS11_TOKEN / CANTON_SIGNER_PKCS11_SLOT). Tokens present: ${present}`,
      );
    const token = matches[0]!;
    if (token.flags & pkcs11js.CKF_USER_PIN_LOCKED)
      throw new KeyError(
        'pin_locked',
        `the user PIN of token "${token.label}" is locked; a security officer must unlock it`,
      );
    return { slot: token.slot, label: token.label };
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

  /**
   * Private objects are invisible to a session that is not logged in (the login can be lost
   * without an error, e.g. by another C_Logout or an HSM's idle timeout): before "not found" is
   * believed, the session must be logged in.
   */
  private requireLogin(session: Buffer): void {
    const state = this.shared.lib.C_GetSessionInfo(session).state;
    if (state !== CKS_RO_USER_FUNCTIONS && state !== CKS_RW_USER_FUNCTIONS) throw new NotLoggedIn();
  }

  private findObjects(session: Buffer, template: Template): Buffer[] {
    const lib = this.shared.lib;
    lib.C_FindObjectsInit(session, template);
    const out: Buffer[] = [];
    try {
      for (;;) {
        const batch = lib.C_FindObjects(session, 256);
        out.push(...batch);
        if (batch.length < 256) break;
      }
    } finally {
      try {
        lib.C_FindObjectsFinal(session);
      } catch {
        // the session is gone; the error that matters was raised above
      }
    }
    return out;
  }

  /** One attribute; undefined when the object does not have it (or it cannot be read). */
  private attribute(session: Buffer, object: Buffer, type: number): Buffer | undefined {
    try {
      const [a] = this.shared.lib.C_GetAttributeValue(session, object, [{ type }]);
      return a?.value;
    } catch (e) {
      const name = ckrName(e);
      if (name === 'CKR_ATTRIBUTE_TYPE_INVALID' || name === 'CKR_ATTRIBUTE_SENSITIVE') return undefined;
      if (name === undefined) return undefined; // pkcs11js could not convert the value
      throw e;
    }
  }

  private lookup(session: Buffer, label: string): TokenKey | undefined {
    const privates = this.findObjects(session, [
      { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
      { type: pkcs11js.CKA_LABEL, value: label },
    ]);
    if (privates.length === 0) {
      this.requireLogin(session);
      return undefined;
    }
    if (privates.length > 1)
      throw new KeyError(
        'hsm_error',
        `${privates.length} private keys are labelled "${label}" on token "${this.tokenLabel}"; remove the extra ones with the token's tools`,
      );
    return this.describe(session, privates[0]!);
  }

  /**
   * A private key with its public key (same CKA_ID) as canton-signer sees it;
   * undefined when it is not a key canton-signer can use.
   */
  private describe(session: Buffer, privateKey: Buffer): TokenKey | undefined {
    const label = this.attribute(session, privateKey, pkcs11js.CKA_LABEL)?.toString('utf8');
    const id = this.attribute(session, privateKey, pkcs11js.CKA_ID);
    const keyType = this.attribute(session, privateKey, pkcs11js.CKA_KEY_TYPE);
    if (!label || !id || id.length === 0 || !keyType) return undefined;
    if (ulong(keyType) !== CKK_EC && ulong(keyType) !== CKK_EC_EDWARDS) return undefined;
    const privateScheme = schemeOf(
      ulong(keyType),
      this.attribute(session, privateKey, pkcs11js.CKA_EC_PARAMS),
    );
    const publics = this.findObjects(session, [
      { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PUBLIC_KEY },
      { type: pkcs11js.CKA_ID, value: id },
    ]);
    if (publics.length !== 1) return undefined;
    const pub = publics[0]!;
    const pubType = this.attribute(session, pub, pkcs11js.CKA_KEY_TYPE);
    const scheme = pubType && schemeOf(ulong(pubType), this.attribute(session, pub, pkcs11js.CKA_EC_PARAMS));
    if (!scheme || (privateScheme !== undefined && privateScheme !== scheme)) return undefined;
    const point = this.attribute(session, pub, pkcs11js.CKA_EC_POINT);
    const raw = point && rawPublicKey(scheme, point);
    let spki: Buffer;
    try {
      if (!raw) throw new Error('bad encoding');
      spki = spkiFromRaw(scheme, raw);
    } catch {
      throw new KeyError(
        'hsm_error',
        `the public key of "${label}" on token "${this.tokenLabel}" is not a valid ${scheme} key`,
      );
    }
    // SoftHSM cannot read CKA_START_DATE back from private objects: it is set on both, read from the public key.
    const createdAt = isoDate(this.attribute(session, pub, pkcs11js.CKA_START_DATE));
    return { label, scheme, spki, createdAt, privateKey, id };
  }

  private checkProtected(session: Buffer, privateKey: Buffer): void {
    const flag = (type: number) => this.attribute(session, privateKey, type)?.[0];
    const sensitive = flag(pkcs11js.CKA_SENSITIVE);
    const extractable = flag(pkcs11js.CKA_EXTRACTABLE);
    const never = flag(pkcs11js.CKA_NEVER_EXTRACTABLE);
    const always = flag(pkcs11js.CKA_ALWAYS_SENSITIVE);
    const isPrivate = flag(pkcs11js.CKA_PRIVATE);
    if (sensitive !== 1 || extractable !== 0 || never !== 1 || always !== 1 || isPrivate !== 1)
      throw new KeyError(
        'hsm_error',
        `token "${this.tokenLabel}" made a private key that is not protected ` +
          `(CKA_SENSITIVE=${sensitive}, CKA_EXTRACTABLE=${extractable}, CKA_NEVER_EXTRACTABLE=${never}, ` +
          `CKA_ALWAYS_SENSITIVE=${always}, CKA_PRIVATE=${isPrivate}); it was destroyed`,
      );
  }

  private destroyQuietly(session: Buffer, handle: Buffer): void {
    try {
      this.shared.lib.C_DestroyObject(session, handle);
    } catch {
      // nothing more to do
    }
  }

  private remember(key: TokenKey): BackendKey {
    this.handles.set(key.label, { handle: key.privateKey, spki: key.spki, generation: this.generation });
    return { label: key.label, scheme: key.scheme, spki: new Uint8Array(key.spki), createdAt: key.createdAt };
  }

  /** The private key handle for `key`, checked to be the same key (same public key) as asked for. */
  private keyHandle(session: Buffer, key: BackendKey): Buffer {
    const cached = this.handles.get(key.label);
    if (cached && cached.generation === this.generation && cached.spki.equals(key.spki)) return cached.handle;
    const found = this.lookup(session, key.label);
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
    const scrub = (text: string) => (this.#pin.length > 0 ? text.split(this.#pin).join('***') : text);
    if (e instanceof KeyError)
      return scrub(e.message) === e.message ? e : new KeyError(e.code, scrub(e.message));
    const name = ckrName(e);
    const token = `token "${this.tokenLabel}"`;
    if (name === undefined)
      return new KeyError('hsm_error', scrub(`${what} on ${token} failed: ${firstLine(e)}`));
    const code = CKR_CODES[name] ?? 'hsm_error';
    switch (code) {
      case 'wrong_pin':
        return new KeyError(
          'wrong_pin',
          `${token} refused the PIN (${name}); not trying again: tokens lock the PIN after a few failures`,
        );
      case 'pin_locked':
        return new KeyError(
          'pin_locked',
          `the user PIN of ${token} is locked (${name}); a security officer must unlock it`,
        );
      case 'mechanism_missing':
        return new KeyError(
          'mechanism_missing',
          `${what}: ${token} does not support the mechanism (${name})`,
        );
      case 'unsupported_scheme':
        return new KeyError('unsupported_scheme', `${what}: ${token} does not support the curve (${name})`);
      case 'key_not_found':
        return new KeyError('key_not_found', `${what}: the key is no longer on ${token} (${name})`);
      default:
        return new KeyError(code, `${what} on ${token} failed (${name})`);
    }
  }
}
