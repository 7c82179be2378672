/**
 * A token-standard Canton Coin transfer end to end through the real clients:
 * the registry (via the validator's scan-proxy) hands out the factory and the
 * choice contexts, the Ledger API prepares, the test recomputes the hash, signs
 * with the party's Ed25519 key and executes. Two-step offers are accepted,
 * rejected and withdrawn; with a TransferPreapproval the factory says `direct`
 * and one execute moves the funds. Refusals carry Canton's codes (bad inputs,
 * deadlines, undisclosed factory, replays, double spends, a stale round), and
 * Scan's history shows the transfers. Responses are checked against the
 * published OpenAPI documents.
 */
import { randomUUID, sign } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CantonApiError } from '../../src/canton/errors.js';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import type {
  Command,
  JsGetActiveContractsResponse,
  JsPrepareSubmissionResponse,
} from '../../src/canton/ledger-api/schemas.js';
import { ScanClient } from '../../src/canton/scan/client.js';
import type { TransactionHistoryItem } from '../../src/canton/scan/schemas.js';
import { ValidatorClient } from '../../src/canton/validator/client.js';
import type {
  RegistryClient,
  TransferFactoryWithChoiceContext,
} from '../../src/canton/validator/registry.js';
import { bytesToBase64 } from '../../src/hashing/input.js';
import { hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import { addAmounts, subAmounts } from '../../src/sandbox/amulet.js';
import { isoMicros } from '../../src/sandbox/ledger/clock.js';
import { identifierString } from '../../src/sandbox/ledger/value-json.js';
import { LEDGER_API_USER, type SandboxNetwork } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { loadSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';
import { addExternalParty, type TestParty } from '../support/sandbox-party.js';

const ledgerSpec = loadSpec(join(SPECS_DIR, 'canton-ledger-api/openapi-3.5.1.yaml'));
const registrySpec = loadSpec(join(SPECS_DIR, 'splice-0.6.1/transfer-instruction-v1.yaml'));

const HOLDING_IFACE = '#splice-api-token-holding-v1:Splice.Api.Token.HoldingV1:Holding';
const INSTRUCTION_IFACE =
  '#splice-api-token-transfer-instruction-v1:Splice.Api.Token.TransferInstructionV1:TransferInstruction';
const FACTORY_IFACE =
  '#splice-api-token-transfer-instruction-v1:Splice.Api.Token.TransferInstructionV1:TransferFactory';

interface Holding {
  cid: string;
  amount: string;
  locked: boolean;
}

let sb: RunningSandbox;
let net: SandboxNetwork;
let ledger: LedgerApiClient;
let registry: RegistryClient;
let scan: ScanClient;
let alice: TestParty;
let bob: TestParty;

function addParty(hint: string): TestParty {
  return addExternalParty(net, hint);
}

async function rejection(p: Promise<unknown>): Promise<CantonApiError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e, 'expected the call to fail').toBeInstanceOf(CantonApiError);
  return e as CantonApiError;
}

function createdEventOf(item: JsGetActiveContractsResponse) {
  const entry = item.contractEntry;
  return entry && 'JsActiveContract' in entry ? entry.JsActiveContract.createdEvent : undefined;
}

/** The party's Amulet holdings through the Ledger API (Holding interface views). */
async function holdings(p: TestParty): Promise<Holding[]> {
  const acs = await ledger.activeContracts({
    activeAtOffset: (await ledger.ledgerEnd()).offset,
    eventFormat: {
      filtersByParty: {
        [p.id]: {
          cumulative: [
            {
              identifierFilter: {
                InterfaceFilter: { value: { interfaceId: HOLDING_IFACE, includeInterfaceView: true } },
              },
            },
          ],
        },
      },
      verbose: false,
    },
  });
  const out: Holding[] = [];
  for (const item of acs) {
    const ev = createdEventOf(item);
    const view = ev?.interfaceViews?.[0]?.viewValue as
      | { owner: string; amount: string; lock: unknown; instrumentId: { admin: string; id: string } }
      | undefined;
    if (!ev || !view || view.owner !== p.id) continue;
    expect(view.instrumentId).toEqual({ admin: net.dso, id: 'Amulet' });
    out.push({ cid: ev.contractId, amount: view.amount, locked: view.lock !== null });
  }
  return out;
}

const ZERO = '0.0000000000';
const sum = (hs: Holding[]) => addAmounts('0', ...hs.map((h) => h.amount));
const unlocked = async (p: TestParty) => (await holdings(p)).filter((h) => !h.locked);
const unlockedTotal = async (p: TestParty) => sum(await unlocked(p));
const lockedTotal = async (p: TestParty) => sum((await holdings(p)).filter((h) => h.locked));

interface TransferOpts {
  amount: string;
  inputs?: string[];
  executeBefore?: bigint;
  reason?: string;
}

/** `TransferFactory_Transfer` arguments with an empty context (what the registry is asked about). */
function transferArgs(from: TestParty, to: TestParty, inputs: string[], o: TransferOpts) {
  const now = net.clock.now();
  return {
    expectedAdmin: net.dso,
    transfer: {
      sender: from.id,
      receiver: to.id,
      amount: o.amount,
      instrumentId: { admin: net.dso, id: 'Amulet' },
      requestedAt: isoMicros(now - 60_000_000n),
      executeBefore: isoMicros(o.executeBefore ?? now + 3_600_000_000n),
      inputHoldingCids: inputs,
      meta: { values: o.reason ? { 'splice.lfdecentralizedtrust.org/reason': o.reason } : {} },
    },
    extraArgs: { context: { values: {} }, meta: { values: {} } },
  };
}

type Disclosed = TransferFactoryWithChoiceContext['choiceContext']['disclosedContracts'];
const forLedger = (ds: Disclosed) =>
  ds.map(({ templateId, contractId, createdEventBlob, synchronizerId }) => ({
    templateId,
    contractId,
    createdEventBlob,
    synchronizerId,
  }));

interface Prepared {
  prep: JsPrepareSubmissionResponse;
  hash: Uint8Array;
}

async function prepareAs(
  p: TestParty,
  command: Command,
  disclosedContracts: ReturnType<typeof forLedger>,
): Promise<Prepared> {
  const prep = await ledger.prepare({
    userId: LEDGER_API_USER,
    commandId: randomUUID(),
    actAs: [p.id],
    synchronizerId: net.synchronizerId,
    commands: [command],
    disclosedContracts,
  });
  const hash = hashPreparedTransaction(prep.preparedTransaction, { scheme: 'v2' });
  expect(bytesToBase64(hash), 'the claimed hash is the recomputed one').toBe(prep.preparedTransactionHash);
  return { prep, hash };
}

/** Registry factory → prepare of TransferFactory_Transfer as the sender. */
async function prepareTransfer(
  from: TestParty,
  to: TestParty,
  o: TransferOpts,
  tweak: { dropFactory?: boolean; drop?: string; extraDisclosed?: ReturnType<typeof forLedger> } = {},
): Promise<Prepared & { factory: TransferFactoryWithChoiceContext }> {
  const inputs = o.inputs ?? (await unlocked(from)).map((h) => h.cid);
  const args = transferArgs(from, to, inputs, o);
  const factory = await registry.getTransferFactory({ choiceArguments: args, excludeDebugFields: true });
  let disclosed = forLedger(factory.choiceContext.disclosedContracts);
  if (tweak.dropFactory) disclosed = disclosed.filter((d) => d.contractId !== factory.factoryId);
  if (tweak.drop) disclosed = disclosed.filter((d) => d.contractId !== tweak.drop);
  disclosed.push(...(tweak.extraDisclosed ?? []));
  const command = {
    ExerciseCommand: {
      templateId: FACTORY_IFACE,
      contractId: factory.factoryId,
      choice: 'TransferFactory_Transfer',
      choiceArgument: {
        ...args,
        extraArgs: { context: factory.choiceContext.choiceContextData, meta: { values: {} } },
      },
    },
  };
  return { ...(await prepareAs(from, command, disclosed)), factory };
}

function executeRequest(p: TestParty, { prep, hash }: Prepared, submissionId = randomUUID()) {
  return {
    preparedTransaction: prep.preparedTransaction,
    partySignatures: {
      signatures: [
        {
          party: p.id,
          signatures: [
            {
              format: 'SIGNATURE_FORMAT_CONCAT' as const,
              signature: bytesToBase64(sign(null, hash, p.key)),
              signedBy: p.fp,
              signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_ED25519' as const,
            },
          ],
        },
      ],
    },
    hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2' as const,
    submissionId,
    userId: LEDGER_API_USER,
    deduplicationPeriod: { Empty: {} },
  };
}

const execute = (p: TestParty, prepared: Prepared) => ledger.executeAndWait(executeRequest(p, prepared));

/** The pending transfer instructions where `p` is sender or receiver (TransferInstruction views). */
async function instructions(p: TestParty) {
  const acs = await ledger.activeContracts({
    activeAtOffset: (await ledger.ledgerEnd()).offset,
    eventFormat: {
      filtersByParty: {
        [p.id]: {
          cumulative: [
            {
              identifierFilter: {
                InterfaceFilter: { value: { interfaceId: INSTRUCTION_IFACE, includeInterfaceView: true } },
              },
            },
          ],
        },
      },
      verbose: false,
    },
  });
  return acs.flatMap((item) => {
    const ev = createdEventOf(item);
    const view = ev?.interfaceViews?.[0]?.viewValue as
      | { transfer: { sender: string; receiver: string; amount: string }; status: { tag: string } }
      | undefined;
    return ev && view ? [{ cid: ev.contractId, ...view }] : [];
  });
}

/** Registry choice context → prepare `TransferInstruction_<choice>` as `p` → execute. */
async function instructionChoice(p: TestParty, cid: string, choice: 'accept' | 'reject' | 'withdraw') {
  const ctx =
    choice === 'accept'
      ? await registry.getTransferInstructionAcceptContext(cid, { excludeDebugFields: true })
      : choice === 'reject'
        ? await registry.getTransferInstructionRejectContext(cid, { excludeDebugFields: true })
        : await registry.getTransferInstructionWithdrawContext(cid, { excludeDebugFields: true });
  const name = `TransferInstruction_${choice[0]!.toUpperCase()}${choice.slice(1)}`;
  const prepared = await prepareAs(
    p,
    {
      ExerciseCommand: {
        templateId: INSTRUCTION_IFACE,
        contractId: cid,
        choice: name,
        choiceArgument: { extraArgs: { context: ctx.choiceContextData, meta: { values: {} } } },
      },
    },
    forLedger(ctx.disclosedContracts),
  );
  return execute(p, prepared);
}

/** Two-step transfer: prepare, sign, execute; returns the new pending instruction's id. */
async function offer(amount: string): Promise<string> {
  const before = new Set((await instructions(bob)).map((i) => i.cid));
  const t = await prepareTransfer(alice, bob, { amount });
  expect(t.factory.transferKind).toBe('offer');
  await execute(alice, t);
  const fresh = (await instructions(bob)).filter((i) => !before.has(i.cid));
  expect(fresh).toHaveLength(1);
  return fresh[0]!.cid;
}

beforeAll(async () => {
  sb = await startSandbox({ seed: 'token-transfer-test', timers: false });
  net = sb.ctx.net;
  ledger = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, retry: { baseDelayMs: 5, maxDelayMs: 20 } });
  registry = new ValidatorClient({ baseUrl: sb.urls.validator, retry: { attempts: 1 } }).registry();
  scan = new ScanClient({ baseUrl: sb.urls.scan, retry: { attempts: 1 } });
  alice = addParty('alice');
  bob = addParty('bob');
  net.tap(alice.id, '1000');
});
afterAll(async () => sb?.close());

describe('two-step transfer (bob has no TransferPreapproval)', () => {
  it('offer: the amount is locked and a pending TransferInstruction names sender, receiver and amount', async () => {
    expect(await unlockedTotal(alice)).toBe('1000.0000000000');
    const inputs = (await unlocked(alice)).map((h) => h.cid);
    const t = await prepareTransfer(alice, bob, { amount: '100', inputs, reason: 'invoice 42' });
    expect(t.factory.transferKind).toBe('offer');
    expect(t.factory.factoryId).toBe(net.externalPartyAmuletRules().contractId);
    expect(t.factory.choiceContext.disclosedContracts.map((d) => d.contractId)).toContain(
      t.factory.factoryId,
    );
    expect(validateAgainst(registrySpec, 'TransferFactoryWithChoiceContext', t.factory)).toEqual([]);
    expect(validateAgainst(ledgerSpec, 'JsPrepareSubmissionResponse', t.prep)).toEqual([]);

    const res = await ledger.executeAndWaitForTransaction({
      ...executeRequest(alice, t),
      transactionFormat: {
        eventFormat: { filtersByParty: { [alice.id]: {} }, verbose: true },
        transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
      },
    });
    expect(validateAgainst(ledgerSpec, 'JsExecuteSubmissionAndWaitForTransactionResponse', res)).toEqual([]);
    const events = JSON.stringify(res.transaction.events);
    for (const cid of inputs) expect(events).toContain(cid); // the inputs are archived

    const pending = await instructions(bob);
    expect(pending).toHaveLength(1);
    expect(pending[0]!.transfer).toMatchObject({ sender: alice.id, receiver: bob.id });
    expect(pending[0]!.transfer.amount).toMatch(/^100(\.0+)?$/);
    expect(pending[0]!.status.tag).toBe('TransferPendingReceiverAcceptance');
    expect(await lockedTotal(alice)).toBe('100.0000000000');
    expect(await unlockedTotal(alice)).toBe('900.0000000000');
    expect(await unlockedTotal(bob)).toBe(ZERO);
  });

  it('bob accepts: bob holds the amount, the lock and the instruction are gone', async () => {
    const [pending] = await instructions(bob);
    const res = await instructionChoice(bob, pending!.cid, 'accept');
    expect(res.updateId).toMatch(/^1220[0-9a-f]{64}$/);
    expect(await instructions(bob)).toEqual([]);
    expect(await unlockedTotal(bob)).toBe('100.0000000000');
    expect(await lockedTotal(alice)).toBe(ZERO);
    expect(await unlockedTotal(alice)).toBe('900.0000000000');
  });

  it('bob rejects: the locked amount goes back to alice, bob gets nothing', async () => {
    const cid = await offer('50');
    expect(await unlockedTotal(alice)).toBe('850.0000000000');
    await instructionChoice(bob, cid, 'reject');
    expect(await instructions(bob)).toEqual([]);
    expect(await lockedTotal(alice)).toBe(ZERO);
    expect(await unlockedTotal(alice)).toBe('900.0000000000');
    expect(await unlockedTotal(bob)).toBe('100.0000000000');
  });

  it('alice withdraws: the locked amount goes back to alice', async () => {
    const cid = await offer('25');
    expect(await lockedTotal(alice)).toBe('25.0000000000');
    await instructionChoice(alice, cid, 'withdraw');
    expect(await instructions(alice)).toEqual([]);
    expect(await unlockedTotal(alice)).toBe('900.0000000000');
    expect(await unlockedTotal(bob)).toBe('100.0000000000');
  });

  it('only the receiver accepts or rejects, only the sender withdraws: DAML_AUTHORIZATION_ERROR', async () => {
    const cid = await offer('10');
    const ctx = await registry.getTransferInstructionAcceptContext(cid);
    for (const [who, choice] of [
      [alice, 'TransferInstruction_Accept'],
      [alice, 'TransferInstruction_Reject'],
      [bob, 'TransferInstruction_Withdraw'],
    ] as const) {
      const e = await rejection(
        prepareAs(
          who,
          {
            ExerciseCommand: {
              templateId: INSTRUCTION_IFACE,
              contractId: cid,
              choice,
              choiceArgument: { extraArgs: { context: ctx.choiceContextData, meta: { values: {} } } },
            },
          },
          forLedger(ctx.disclosedContracts),
        ),
      );
      expect(e.status).toBe(400);
      expect(e.code).toBe('DAML_AUTHORIZATION_ERROR');
    }
    await instructionChoice(alice, cid, 'withdraw');
    expect(await unlockedTotal(alice)).toBe('900.0000000000');
  });

  it('a choice context for a contract that is no transfer instruction: registry 404 {error}', async () => {
    const notInstr = (await unlocked(alice))[0]!.cid;
    const e = await rejection(registry.getTransferInstructionAcceptContext(notInstr));
    expect(e.status).toBe(404);
    expect(e.service).toBe('registry');
    expect(e.spliceError).toContain(notInstr);
  });
});

describe('refusals, with Canton codes', () => {
  it('amount above the inputs: DAML_INTERPRETATION_ERROR (400, category 9), as Canton reports a Daml error', async () => {
    const e = await rejection(prepareTransfer(alice, bob, { amount: '100000' }));
    expect(e.status).toBe(400);
    expect(e.code).toBe('DAML_INTERPRETATION_ERROR');
    expect(e.category).toBe('InvalidGivenCurrentSystemStateOther');
    expect(e.detail).toContain('Interpretation error');
  });

  it('executeBefore in the past: DAML_INTERPRETATION_ERROR', async () => {
    const e = await rejection(
      prepareTransfer(alice, bob, { amount: '1', executeBefore: net.clock.now() - 1_000_000n }),
    );
    expect(e.code).toBe('DAML_INTERPRETATION_ERROR');
    expect(e.detail).toContain('executeBefore');
  });

  it('a (disclosed) holding of bob among the inputs: refused while interpreting', async () => {
    const bobs = (await unlocked(bob))[0]!.cid;
    const c = net.store.get(bobs)!;
    const e = await rejection(
      prepareTransfer(
        alice,
        bob,
        { amount: '1', inputs: [(await unlocked(alice))[0]!.cid, bobs] },
        {
          extraDisclosed: [
            {
              templateId: identifierString(c.templateId),
              contractId: c.contractId,
              createdEventBlob: c.createdEventBlob,
              synchronizerId: net.synchronizerId,
            },
          ],
        },
      ),
    );
    expect(e.code).toBe('DAML_INTERPRETATION_ERROR');
  });

  it('a holding of bob among the inputs, not disclosed: CONTRACT_NOT_FOUND (404), alice cannot see it', async () => {
    const bobs = (await unlocked(bob))[0]!.cid;
    const e = await rejection(
      prepareTransfer(alice, bob, { amount: '1', inputs: [(await unlocked(alice))[0]!.cid, bobs] }),
    );
    expect(e.status).toBe(404);
    expect(e.code).toBe('CONTRACT_NOT_FOUND');
    expect(e.detail).toContain(bobs);
  });

  it('the factory not disclosed: CONTRACT_NOT_FOUND (404) naming it', async () => {
    const e = await rejection(prepareTransfer(alice, bob, { amount: '1' }, { dropFactory: true }));
    expect(e.status).toBe(404);
    expect(e.code).toBe('CONTRACT_NOT_FOUND');
    expect(e.detail).toContain(net.externalPartyAmuletRules().contractId);
  });

  it('the open round or AmuletRules not disclosed (the sender is no stakeholder): CONTRACT_NOT_FOUND (404) naming it', async () => {
    const round = net.latestRound().contractId;
    const rules = net.amuletRules().contractId;
    for (const cid of [round, rules]) {
      const t = prepareTransfer(alice, bob, { amount: '1' }, { drop: cid });
      const e = await rejection(t);
      expect(e.status).toBe(404);
      expect(e.code).toBe('CONTRACT_NOT_FOUND');
      expect(e.detail).toContain(cid);
    }
  });

  it('the same prepared transaction executed twice: DUPLICATE_COMMAND (409), nothing moves twice', async () => {
    const t = await prepareTransfer(alice, bob, { amount: '5' });
    await execute(alice, t);
    const total = await unlockedTotal(alice);
    const e = await rejection(execute(alice, t));
    expect(e.status).toBe(409);
    expect(e.code).toBe('DUPLICATE_COMMAND');
    expect(await unlockedTotal(alice)).toBe(total);
    const [pending] = (await instructions(alice)).filter((i) => i.transfer.amount.startsWith('5'));
    await instructionChoice(alice, pending!.cid, 'withdraw');
  });

  it('two transfers from the same holding: the second execute is LOCAL_VERDICT_INACTIVE_CONTRACTS (404)', async () => {
    const [input] = await unlocked(alice);
    const first = await prepareTransfer(alice, bob, { amount: '3', inputs: [input!.cid] });
    const second = await prepareTransfer(alice, bob, { amount: '4', inputs: [input!.cid] });
    await execute(alice, first);
    const total = await unlockedTotal(alice);
    const e = await rejection(execute(alice, second));
    expect(await unlockedTotal(alice)).toBe(total);
    const pending = await instructions(bob);
    expect(pending.map((i) => i.transfer.amount)).toEqual([expect.stringMatching(/^3(\.0+)?$/)]);
    await instructionChoice(bob, pending[0]!.cid, 'reject');
    expect(e.code).toBe('LOCAL_VERDICT_INACTIVE_CONTRACTS');
    expect(e.detail).toContain(input!.cid);
    // Canton: InactiveContracts is InvalidGivenCurrentSystemStateResourceMissing → NOT_FOUND.
    expect(e.cantonError?.errorCategory).toBe(11);
    expect(e.status).toBe(404);
  });
});

describe('Scan history', () => {
  it('shows the offers, the acceptance and the aborted instructions with the right parties and amounts', async () => {
    const items: TransactionHistoryItem[] = [];
    for await (const t of scan.transactions({ pageSize: 3, sortOrder: 'asc' })) items.push(t);
    const tap = items.find((t) => t.transaction_type === 'devnet_tap' && t.tap?.amulet_owner === alice.id);
    expect(tap?.tap?.amulet_amount).toMatch(/^1000(\.0+)?$/);
    const transfers = items.filter(
      (t) => t.transaction_type === 'transfer' && t.transfer?.sender.party === alice.id,
    );
    const accepted = transfers.filter((t) => t.transfer?.transfer_kind === 'transfer_instruction_accept');
    expect(accepted).toHaveLength(1);
    expect(accepted[0]!.transfer!.receivers).toEqual([
      expect.objectContaining({ party: bob.id, amount: expect.stringMatching(/^100(\.0+)?$/) }),
    ]);
    const offers = transfers.filter((t) => t.transfer?.transfer_kind === 'create_transfer_instruction');
    expect(
      offers.map((t) => [
        t.transfer!.transferInstructionReceiver,
        Number(t.transfer!.transferInstructionAmount),
      ]),
    ).toEqual([100, 50, 25, 10, 5, 3].map((a) => [bob.id, a]));
    const aborts = items.filter((t) => t.transaction_type === 'abort_transfer_instruction');
    expect(aborts.map((t) => t.abort_transfer_instruction?.abort_kind)).toEqual([
      'reject',
      'withdraw',
      'withdraw',
      'withdraw',
      'reject',
    ]);
  });
});

describe('direct transfer (bob has a TransferPreapproval)', () => {
  it('bob creates a proposal, the validator accepts it, the factory says direct, one execute moves the funds', async () => {
    const proposal = await prepareAs(
      bob,
      {
        CreateCommand: {
          templateId: '#splice-wallet:Splice.Wallet.TransferPreapproval:TransferPreapprovalProposal',
          createArguments: { receiver: bob.id, provider: net.validatorParty, expectedDso: net.dso },
        },
      },
      [],
    );
    await execute(bob, proposal);
    const aliceBefore = await unlockedTotal(alice);
    const bobBefore = await unlockedTotal(bob);
    const t = await prepareTransfer(alice, bob, { amount: '200' });
    expect(t.factory.transferKind).toBe('direct');
    expect(Object.keys(t.factory.choiceContext.choiceContextData.values as object)).toContain(
      'transfer-preapproval',
    );
    await execute(alice, t);
    expect(await instructions(bob)).toEqual([]);
    expect(await unlockedTotal(bob)).toBe(addAmounts(bobBefore, '200'));
    expect(await unlockedTotal(alice)).toBe(subAmounts(aliceBefore, '200'));

    const items: TransactionHistoryItem[] = [];
    for await (const x of scan.transactions({ pageSize: 10, sortOrder: 'desc' })) {
      items.push(x);
      if (items.length === 1) break;
    }
    expect(items[0]!.transaction_type).toBe('transfer');
    expect(items[0]!.transfer!.sender.party).toBe(alice.id);
    expect(items[0]!.transfer!.receivers).toEqual([
      expect.objectContaining({ party: bob.id, amount: expect.stringMatching(/^200(\.0+)?$/) }),
    ]);
  });

  it('a stale open round (expiredRound fault on prepare): execute is LOCAL_VERDICT_INACTIVE_CONTRACTS', async () => {
    sb.ctx.faults.inject({ fault: { kind: 'expiredRound' }, operation: 'ledger-api.prepare', times: 1 });
    const t = await prepareTransfer(alice, bob, { amount: '1' });
    const roundId = (t.factory.choiceContext.choiceContextData.values as Record<string, { value: string }>)[
      'open-round'
    ]!.value;
    expect(net.store.get(roundId)).toBeUndefined(); // archived while the party was signing
    const before = await unlockedTotal(alice);
    const e = await rejection(execute(alice, t));
    expect(await unlockedTotal(alice)).toBe(before);
    expect(e.code).toBe('LOCAL_VERDICT_INACTIVE_CONTRACTS');
    expect(e.detail).toContain(roundId);
    expect(e.status).toBe(404);
  });
});

describe('holding fees (Amulet values inputs as of the open round)', () => {
  it('the Holding view carries created-in-round and rate-per-round; after rounds pass the whole initial amount is refused, its value goes through', async () => {
    const carol = addParty('carol');
    const tapped = net.tap(carol.id, '10');
    const acs = await ledger.activeContracts({
      activeAtOffset: (await ledger.ledgerEnd()).offset,
      eventFormat: {
        filtersByParty: {
          [carol.id]: {
            cumulative: [
              {
                identifierFilter: {
                  InterfaceFilter: { value: { interfaceId: HOLDING_IFACE, includeInterfaceView: true } },
                },
              },
            ],
          },
        },
        verbose: false,
      },
    });
    const view = createdEventOf(acs[0]!)?.interfaceViews?.[0]?.viewValue as {
      amount: string;
      meta: { values: Record<string, string> };
    };
    expect(view.amount).toBe('10.0000000000'); // the initial amount, as Amulet's view states it
    const createdIn = BigInt(view.meta.values['amulet.splice.lfdecentralizedtrust.org/created-in-round']!);
    expect(view.meta.values['amulet.splice.lfdecentralizedtrust.org/rate-per-round']).toBe('0.0000190259');
    net.advanceRound();
    net.advanceRound();
    const round = net.latestRound().number;
    expect(round).toBeGreaterThan(createdIn);
    const totalFees = addAmounts(...Array.from({ length: Number(round - createdIn) }, () => '0.0000190259'));
    const value = subAmounts('10', totalFees);

    const e = await rejection(prepareTransfer(carol, carol, { amount: '10', inputs: [tapped.contractId] }));
    expect(e.status).toBe(400);
    expect(e.code).toBe('DAML_INTERPRETATION_ERROR');
    expect(e.detail).toContain('insufficient funds');
    expect(e.detail).toContain(`inputs hold ${value} as of round ${round}`);

    // A self-transfer of 9: the change is the value after fees minus 9.
    await execute(carol, await prepareTransfer(carol, carol, { amount: '9', inputs: [tapped.contractId] }));
    expect((await unlocked(carol)).map((h) => h.amount).sort()).toEqual(
      [subAmounts(value, '9'), '9.0000000000'].sort(),
    );
  });
});
