/**
 * One environment for the flow tests: a sandbox network (timers off, fixed
 * seed), a Signer over a temp file keystore (cheap scrypt) and, when asked,
 * a SoftHSM2 token as its PKCS#11 backend; the clients; a FlowContext with an
 * in-memory party book and journal; and `addParty`, which puts a key's party
 * straight onto the sandbox ledger (hosted, with the Ledger API user's rights)
 * and into the party book — for flows other than onboarding itself. Also the
 * helpers the flow tests share: `hostParty` (the same for any signer and party
 * book), `refusal`, `ambiguousExecute` and `preapprovalProposal`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, expect, vi } from 'vitest';
import { CantonApiError } from '../../src/canton/errors.js';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import { ScanClient } from '../../src/canton/scan/client.js';
import { ValidatorClient } from '../../src/canton/validator/client.js';
import type { FlowContext } from '../../src/flows/context.js';
import { Refusal } from '../../src/flows/refusal.js';
import type { BackendKind, KeyBackend } from '../../src/keys/backend.js';
import type { KeyScheme } from '../../src/keys/schemes.js';
import type { KeyDescription, Signer } from '../../src/keys/signer.js';
import { hostExternalParty, sandboxPartyRecord } from '../../src/sandbox/host-party.js';
import { LEDGER_API_USER, type SandboxNetwork } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { MemoryRecorder } from '../../src/store/journal.js';
import { MemoryPartyBook, type PartyBook, type PartyRecord } from '../../src/store/parties.js';
import { createSoftHsmToken, requireSoftHsm, type SoftHsmToken } from './softhsm.js';
import { testSigner } from './test-signer.js';

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
  /** Before each test: mocks restored, journal emptied, injected faults cleared. */
  reset(): void;
  close(): Promise<void>;
}

export { testSigner } from './test-signer.js';

/**
 * A new key in `signer` and its party put straight onto the sandbox ledger
 * (hosted, with the Ledger API user's rights), funded with `fund` if given,
 * and into `book`.
 */
export async function hostParty(
  net: SandboxNetwork,
  signer: Signer,
  book: PartyBook,
  hint: string,
  o: { label?: string; scheme?: KeyScheme; backend?: BackendKind; fund?: string } = {},
): Promise<PartyRecord> {
  const key = await signer.generate({
    label: o.label ?? hint,
    scheme: o.scheme ?? 'ed25519',
    backend: o.backend ?? 'file',
  });
  const rec = sandboxPartyRecord(net, hint, key);
  hostExternalParty(net, rec, o.fund ? { fund: o.fund } : {});
  await book.put(rec);
  return rec;
}

/** The Refusal `p` rejects with; fails the test when it resolves or rejects with something else. */
export async function refusal(p: Promise<unknown>): Promise<Refusal> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e, 'expected a refusal').toBeInstanceOf(Refusal);
  return e as Refusal;
}

/**
 * A context whose Ledger API client gives up after 400 ms, with the sandbox's
 * next execute committing but answering only after 1.5 s: an ambiguous execute.
 */
export function ambiguousExecute(env: FlowEnv): FlowContext {
  const ledger = new LedgerApiClient({
    baseUrl: env.sb.urls.ledgerApi,
    timeoutMs: 400,
    retry: { attempts: 1 },
  });
  env.sb.ctx.faults.inject({
    fault: { kind: 'timeoutAfterCommit', ms: 1500 },
    operation: 'ledger-api.executeAndWait',
    times: 1,
  });
  return { ...env.ctx, ledger };
}

export const PREAPPROVAL_PROPOSAL_TEMPLATE =
  '#splice-wallet:Splice.Wallet.TransferPreapproval:TransferPreapprovalProposal';

/** The create command of a TransferPreapprovalProposal for `receiver` naming `provider`. */
export const preapprovalProposal = (net: SandboxNetwork, receiver: string, provider: string) => ({
  CreateCommand: {
    templateId: PREAPPROVAL_PROPOSAL_TEMPLATE,
    createArguments: { receiver, provider, expectedDso: net.dso },
  },
});

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
  const signer = testSigner(dir, 'flow-test-passphrase', pkcs11);
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
    // The in-process sandbox answers a completion read at once: waiting 1.5 s for more, as for a
    // remote participant, only makes each lookup of an unknown outcome slower.
    completionIdleMs: 100,
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
    addParty: (hint, o = {}) =>
      hostParty(net, signer, parties, hint, {
        ...o,
        label: `${hint}-${Math.random().toString(36).slice(2, 8)}`,
      }),
    reset() {
      vi.restoreAllMocks();
      journal.records.length = 0;
      sb.ctx.faults.clear();
    },
    async close() {
      await sb.close();
      await signer.close();
      await token?.cleanup();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The ledger's answer that a command id is already taken (committed, or in flight), as executeAndWait gives it. */
export function takenCommandError(
  code: 'DUPLICATE_COMMAND' | 'SUBMISSION_ALREADY_IN_FLIGHT',
): CantonApiError {
  return new CantonApiError({
    status: 409,
    service: 'ledger-api',
    method: 'POST',
    path: '/v2/interactive-submission/executeAndWait',
    code,
    retryable: false,
    ambiguous: false,
  });
}

/**
 * The shared setup of the onboarding suites, registered on the calling file:
 * a flow env whose Ledger API user is a participant admin (allocating
 * external parties through the Ledger API takes one, Canton 3.4), mocks
 * restored and the journal emptied before each test; `newKey` makes a fresh
 * file key labelled after `seed`.
 */
export function onboardingSuite(
  seed: string,
  ready: (env: FlowEnv) => void,
): { newKey: (scheme?: KeyScheme) => Promise<KeyDescription> } {
  let env: FlowEnv | undefined;
  let n = 0;
  beforeAll(async () => {
    env = await flowEnv({ seed });
    env.net.users.get(LEDGER_API_USER)!.admin = true;
    ready(env);
  });
  afterAll(async () => env?.close());
  beforeEach(() => {
    vi.restoreAllMocks();
    if (env) env.journal.records.length = 0;
  });
  return {
    newKey: (scheme = 'ed25519') =>
      env!.signer.generate({ label: `${seed}-${scheme}-${++n}`, scheme, backend: 'file' }),
  };
}
