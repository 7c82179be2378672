/**
 * One environment for the flow tests: a sandbox network (timers off, fixed
 * seed), a Signer over a temp file keystore (cheap scrypt) and, when asked,
 * a SoftHSM2 token as its PKCS#11 backend; the clients; a FlowContext with an
 * in-memory party book and journal; and `addParty`, which puts a key's party
 * straight onto the sandbox ledger (hosted, with the Ledger API user's rights)
 * and into the party book — for flows other than onboarding itself.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import { ScanClient } from '../../src/canton/scan/client.js';
import { ValidatorClient } from '../../src/canton/validator/client.js';
import type { FlowContext } from '../../src/flows/context.js';
import { partyId as makePartyId } from '../../src/hashing/canton-hash.js';
import type { BackendKind, KeyBackend } from '../../src/keys/backend.js';
import { FileBackend } from '../../src/keys/file-backend.js';
import type { KeyScheme } from '../../src/keys/schemes.js';
import { Signer } from '../../src/keys/signer.js';
import { LEDGER_API_USER, type SandboxNetwork } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { MemoryRecorder } from '../../src/store/journal.js';
import { MemoryPartyBook, type PartyRecord } from '../../src/store/parties.js';
import { createSoftHsmToken, requireSoftHsm, type SoftHsmToken } from './softhsm.js';

export interface FlowEnv {
  sb: RunningSandbox;
  net: SandboxNetwork;
  signer: Signer;
  ledger: LedgerApiClient;
  validator: ValidatorClient;
  scan: ScanClient;
  parties: MemoryPartyBook;
  journal: MemoryRecorder;
  ctx: FlowContext;
  /** Present when the env was made with `hsm: true`. */
  token?: SoftHsmToken;
  /** A new key in `backend` and its party on the ledger and in the party book. */
  addParty(
    hint: string,
    opts?: { scheme?: KeyScheme; backend?: BackendKind; fund?: string },
  ): Promise<PartyRecord>;
  close(): Promise<void>;
}

export async function flowEnv(
  opts: { seed?: string; hsm?: boolean; validatorFunds?: string } = {},
): Promise<FlowEnv> {
  const dir = await mkdtemp(join(tmpdir(), 'canton-signer-flows-'));
  let token: SoftHsmToken | undefined;
  let pkcs11: KeyBackend | undefined;
  if (opts.hsm) {
    const module = requireSoftHsm();
    if (!module) throw new Error('SoftHSM2 is required for this test file (apt-get install softhsm2)');
    token = await createSoftHsmToken({ module });
    const { Pkcs11Backend } = await import('../../src/keys/pkcs11-backend.js');
    pkcs11 = await Pkcs11Backend.open({ module, token: token.tokenLabel, pin: token.pin });
  }
  const signer = new Signer({
    file: new FileBackend({
      dir,
      passphrase: () => 'flow-test-passphrase',
      scrypt: { N: 2 ** 14, r: 8, p: 1 },
    }),
    ...(pkcs11 ? { pkcs11 } : {}),
    stateDir: dir,
  });
  const sb = await startSandbox({
    seed: opts.seed ?? 'flows',
    timers: false,
    ...(opts.validatorFunds ? { validatorFunds: opts.validatorFunds } : {}),
  });
  const net = sb.ctx.net;
  const ledger = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, retry: { attempts: 1 } });
  const validator = new ValidatorClient({ baseUrl: sb.urls.validator, retry: { attempts: 1 } });
  const scan = new ScanClient({ baseUrl: sb.urls.scan, retry: { attempts: 1 } });
  const parties = new MemoryPartyBook();
  const journal = new MemoryRecorder();
  const ctx: FlowContext = {
    signer,
    ledger,
    userId: LEDGER_API_USER,
    validator,
    scan,
    parties,
    recorder: journal,
    synchronizerId: net.synchronizerId,
    nowUs: () => net.clock.now(),
  };
  return {
    sb,
    net,
    signer,
    ledger,
    validator,
    scan,
    parties,
    journal,
    ctx,
    ...(token ? { token } : {}),
    async addParty(hint, o = {}) {
      const key = await signer.generate({
        label: `${hint}-${Math.random().toString(36).slice(2, 8)}`,
        scheme: o.scheme ?? 'ed25519',
        backend: o.backend ?? 'file',
      });
      const id = makePartyId(hint, key.fingerprint);
      net.parties.set(id, {
        partyId: id,
        namespace: key.fingerprint,
        keys: [{ fingerprint: key.fingerprint, scheme: key.scheme, spki: key.publicKeySpki }],
        threshold: 1,
        hosting: [{ participantUid: net.participantUid, permission: 'confirmation' }],
        via: 'ledger-api',
      });
      net.users.get(LEDGER_API_USER)!.actAs.add(id);
      if (o.fund) net.tap(id, o.fund);
      const rec: PartyRecord = {
        partyId: id,
        hint,
        keyLabel: key.label,
        scheme: key.scheme,
        fingerprint: key.fingerprint,
        publicKeySpki: Buffer.from(key.publicKeySpki).toString('base64'),
        via: 'ledger-api',
        participantUid: net.participantUid,
        synchronizerId: net.synchronizerId,
        createdAt: new Date().toISOString(),
      };
      await parties.put(rec);
      return rec;
    },
    async close() {
      await sb.close();
      await signer.close();
      await token?.cleanup();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
