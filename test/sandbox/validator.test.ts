/**
 * The real ValidatorClient and RegistryClient against the sandbox validator:
 * Ed25519 onboarding (topology generate → sign → submit → setup proposal →
 * prepare-accept → sign → submit-accept → TransferPreapproval), the legacy
 * preapproval send executed by the SV automation (balances, counter, status),
 * and the refusals with Splice's statuses: a bad signature, a replayed nonce,
 * a receiver without preapproval, insufficient funds, unknown parties, a
 * non-operator token. The registry hands out `direct` / `offer` factories and
 * instruction choice contexts the participant's interpreter reads; responses
 * are checked against the published OpenAPI documents.
 */
import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { staticBearer } from '../../src/canton/auth.js';
import { CantonApiError } from '../../src/canton/errors.js';
import { ValidatorClient } from '../../src/canton/validator/client.js';
import type { RegistryClient } from '../../src/canton/validator/registry.js';
import { hexToBytes } from '../../src/hashing/input.js';
import { amuletContract, balanceOf } from '../../src/sandbox/amulet.js';
import { transferCommandStatus } from '../../src/sandbox/automation.js';
import type { SandboxContext } from '../../src/sandbox/context.js';
import { big, str } from '../../src/sandbox/ledger/value-json.js';
import { LEDGER_API_USER, type SandboxNetwork } from '../../src/sandbox/network.js';
import {
  cid,
  ID,
  lockedAmuletRecord,
  record,
  tokenTransferRecord,
} from '../../src/sandbox/prepared/common.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { loadSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';

interface Party {
  id: string;
  key: KeyObject;
  publicHex: string;
}

let sb: RunningSandbox;
let net: SandboxNetwork;
let ctx: SandboxContext;
let base: string;
let validator: ValidatorClient;
let registry: RegistryClient;
let alice: Party;
let bob: Party;
let carol: Party;

const signHex = (p: Party, hex: string) => sign(null, Buffer.from(hexToBytes(hex)), p.key).toString('hex');

async function onboardTopology(hint: string): Promise<Party> {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const publicHex = spki.subarray(spki.length - 32).toString('hex');
  const gen = await validator.generateTopology({ party_hint: hint, public_key: publicHex });
  const party = { id: gen.party_id, key: privateKey, publicHex };
  const sub = await validator.submitTopology({
    public_key: publicHex,
    signed_topology_txs: gen.topology_txs.map((t) => ({
      topology_tx: t.topology_tx,
      signed_hash: signHex(party, t.hash),
    })),
  });
  expect(sub.party_id).toBe(gen.party_id);
  return party;
}

async function acceptSetup(p: Party) {
  const { contract_id } = await validator.createSetupProposal({ user_party_id: p.id });
  const prep = await validator.prepareAcceptSetupProposal({ contract_id, user_party_id: p.id });
  expect(prep.tx_hash).toMatch(/^[0-9a-f]{64}$/);
  return validator.submitAcceptSetupProposal({
    submission: {
      party_id: p.id,
      transaction: prep.transaction,
      signed_tx_hash: signHex(p, prep.tx_hash),
      public_key: p.publicHex,
    },
  });
}

async function send(from: Party, to: Party, amount: string, nonce: number) {
  const prep = await validator.prepareTransferPreapprovalSend({
    sender_party_id: from.id,
    receiver_party_id: to.id,
    amount,
    expires_at: new Date(Date.now() + 3_600_000),
    nonce,
  });
  const res = await validator.submitTransferPreapprovalSend({
    submission: {
      party_id: from.id,
      transaction: prep.transaction,
      signed_tx_hash: signHex(from, prep.tx_hash),
      public_key: from.publicHex,
    },
  });
  await new Promise((r) => setImmediate(r)); // the automation runs after the commit
  return { prep, res };
}

async function refusal(p: Promise<unknown>): Promise<CantonApiError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(CantonApiError);
  return e as CantonApiError;
}

const unlocked = (p: Party) => balanceOf(net.store, p.id, net.latestRound().number).totalUnlocked;
const counterOf = (p: Party) =>
  net.store.activeContracts('TransferCommandCounter').find((c) => str(c.argument, 'sender') === p.id);

beforeAll(async () => {
  sb = await startSandbox({ timers: false, auth: { tokens: { other: LEDGER_API_USER } } });
  ctx = sb.ctx;
  net = ctx.net;
  base = sb.urls.validator;
  validator = new ValidatorClient({ baseUrl: base, retry: { attempts: 1 } });
  registry = validator.registry();
  alice = await onboardTopology('alice');
  bob = await onboardTopology('bob');
  carol = await onboardTopology('carol');
});

afterAll(async () => {
  await sb.close();
});

describe('external-party onboarding through the validator', () => {
  it('setup proposal → prepare-accept → signed submit-accept creates the TransferPreapproval', async () => {
    const res = await acceptSetup(alice);
    const pre = net.store.get(res.transfer_preapproval_contract_id)!;
    expect(pre.templateId.entityName).toBe('TransferPreapproval');
    expect(str(pre.argument, 'receiver')).toBe(alice.id);
    expect(str(pre.argument, 'provider')).toBe(net.validatorParty);
    const looked = await validator.lookupTransferPreapproval(alice.id);
    expect(looked.transfer_preapproval.contract.contract_id).toBe(res.transfer_preapproval_contract_id);
    const list = await validator.listTransferPreapprovals();
    expect(list.contracts.map((c) => c.contract.contract_id)).toContain(res.transfer_preapproval_contract_id);
    // The proposal is consumed.
    expect((await validator.listSetupProposals()).contracts).toEqual([]);
    await acceptSetup(bob);
  });

  it('refuses a second proposal once the party has a preapproval (409) and an unknown party (404)', async () => {
    const dup = await refusal(validator.createSetupProposal({ user_party_id: alice.id }));
    expect(dup.status).toBe(409);
    expect(dup.spliceError).toMatch(/TransferPreapproval contract already exists/);
    const unknown = await refusal(
      validator.createSetupProposal({ user_party_id: `nobody::1220${'0'.repeat(64)}` }),
    );
    expect(unknown.status).toBe(404);
  });

  it('refuses an accept signed with the wrong key (400, FAILED_TO_EXECUTE_TRANSACTION)', async () => {
    const { contract_id } = await validator.createSetupProposal({ user_party_id: carol.id });
    const again = await refusal(validator.createSetupProposal({ user_party_id: carol.id }));
    expect(again.status).toBe(409);
    const prep = await validator.prepareAcceptSetupProposal({ contract_id, user_party_id: carol.id });
    const e = await refusal(
      validator.submitAcceptSetupProposal({
        submission: {
          party_id: carol.id,
          transaction: prep.transaction,
          signed_tx_hash: signHex(bob, prep.tx_hash),
          public_key: carol.publicHex,
        },
      }),
    );
    expect(e.status).toBe(400);
    expect(e.spliceError).toMatch(
      /^FAILED_TO_EXECUTE_TRANSACTION\(8,[0-9a-f]{8}\): Received 0 valid signatures/,
    );
    expect(str(net.store.get(contract_id)!.argument, 'user')).toBe(carol.id); // still pending
  });

  it('prepare-accept: another contract id is 400, a party without proposal 404', async () => {
    const wrong = await refusal(
      validator.prepareAcceptSetupProposal({ contract_id: '00ab', user_party_id: carol.id }),
    );
    expect(wrong.status).toBe(400);
    expect(wrong.spliceError).toBe('Found contract does not match provided contractId.');
    const none = await refusal(
      validator.prepareAcceptSetupProposal({ contract_id: '00ab', user_party_id: bob.id }),
    );
    expect(none.status).toBe(404);
  });

  it('a token of another user is 403 on every admin route', async () => {
    const other = new ValidatorClient({ baseUrl: base, auth: staticBearer('other'), retry: { attempts: 1 } });
    for (const call of [
      () => other.listUsers(),
      () => other.listSetupProposals(),
      () => other.externalPartyBalance(alice.id),
      () => other.createSetupProposal({ user_party_id: carol.id }),
    ]) {
      const e = await refusal(call());
      expect(e.status).toBe(403);
    }
  });
});

describe('legacy preapproval send (prepare-send / submit-send + SV automation)', () => {
  it('moves the amount, bumps the counter and reports sent', async () => {
    net.tap(alice.id, '100');
    const before = { a: unlocked(alice), b: unlocked(bob) };
    const { prep, res } = await send(alice, bob, '12.5', 0);
    expect(res.update_id).toMatch(/^1220[0-9a-f]{64}$/);
    expect(unlocked(bob)).toBe('12.5000000000');
    expect(before.b).toBe('0.0000000000');
    expect(unlocked(alice)).toBe('87.5000000000');
    expect(big(counterOf(alice)!.argument, 'nextNonce')).toBe(1n);
    const st = await validator.scanProxyTransferCommandStatus({ sender: alice.id, nonce: 0 });
    const [cidKey, entry] = Object.entries(st.transfer_commands_by_contract_id)[0]!;
    expect(cidKey.startsWith(prep.transfer_command_contract_id_prefix)).toBe(true);
    expect(entry.status).toEqual({ status: 'sent' });
    const bal = await validator.externalPartyBalance(bob.id);
    expect(bal.total_unlocked_coin).toBe('12.5000000000');
  });

  it('a replayed nonce is created on the ledger and then fails', async () => {
    await send(alice, bob, '1', 0);
    const entries = Object.values(transferCommandStatus(net, alice.id, 0n)!.transfer_commands_by_contract_id);
    const failed = entries.find((e) => e.status.status === 'failed');
    expect(failed?.status).toMatchObject({
      failure_kind: 'failed',
      reason: expect.stringMatching(/already used/),
    });
    expect(unlocked(bob)).toBe('12.5000000000');
    expect(big(counterOf(alice)!.argument, 'nextNonce')).toBe(1n);
  });

  it('insufficient funds fail the command (counter bumped, nothing moved)', async () => {
    await send(alice, bob, '1000', 1);
    const st = Object.values(transferCommandStatus(net, alice.id, 1n)!.transfer_commands_by_contract_id)[0]!;
    expect(st.status).toMatchObject({
      status: 'failed',
      reason: expect.stringMatching(/^Insufficient funds/),
    });
    expect(unlocked(alice)).toBe('87.5000000000');
    expect(big(counterOf(alice)!.argument, 'nextNonce')).toBe(2n);
  });

  it('a future nonce waits as created', async () => {
    await send(alice, bob, '1', 5);
    const st = Object.values(transferCommandStatus(net, alice.id, 5n)!.transfer_commands_by_contract_id)[0]!;
    expect(st.status).toEqual({ status: 'created' });
    expect(transferCommandStatus(net, alice.id, 4n)).toBeUndefined();
  });

  it("a tampered prepare-send (fault) is refused at submit: the signed hash is not the transaction's", async () => {
    ctx.faults.inject({
      fault: { kind: 'tamper', change: 'amount', hash: 'original' },
      operation: 'validator.prepareTransferPreapprovalSend',
      times: 1,
    });
    const e = await refusal(send(alice, bob, '2', 2));
    expect(e.status).toBe(400);
    expect(e.spliceError).toMatch(/^FAILED_TO_EXECUTE_TRANSACTION/);
    expect(transferCommandStatus(net, alice.id, 2n)).toBeUndefined();
  });

  it('a submit-send after expires_at is refused (400, the ledger-time rejection): no TransferCommand', async () => {
    const prep = await validator.prepareTransferPreapprovalSend({
      sender_party_id: alice.id,
      receiver_party_id: bob.id,
      amount: '1',
      expires_at: new Date(Number(net.clock.now() / 1000n) + 5_000),
      nonce: 7,
    });
    net.clock.advance(6_000);
    const e = await refusal(
      validator.submitTransferPreapprovalSend({
        submission: {
          party_id: alice.id,
          transaction: prep.transaction,
          signed_tx_hash: signHex(alice, prep.tx_hash),
          public_key: alice.publicHex,
        },
      }),
    );
    expect(e.status).toBe(400);
    expect(e.spliceError).toMatch(/^LOCAL_VERDICT_LEDGER_TIME_OUT_OF_BOUND\(9,[0-9a-f]{8}\): .*expiresAt/);
    expect(transferCommandStatus(net, alice.id, 7n)).toBeUndefined();
  });

  it('refuses a receiver without preapproval (400) and an unknown sender (404)', async () => {
    const e = await refusal(
      validator.prepareTransferPreapprovalSend({
        sender_party_id: alice.id,
        receiver_party_id: carol.id,
        amount: '1',
        expires_at: new Date(Date.now() + 60_000),
        nonce: 2,
      }),
    );
    expect(e.status).toBe(400);
    expect(e.spliceError).toBe(`Receiver ${carol.id} does not have a TransferPreapproval`);
    const u = await refusal(
      validator.prepareTransferPreapprovalSend({
        sender_party_id: `ghost::1220${'1'.repeat(64)}`,
        receiver_party_id: bob.id,
        amount: '1',
        expires_at: new Date(Date.now() + 60_000),
        nonce: 0,
      }),
    );
    expect(u.status).toBe(404);
  });

  it('balance: 404 for a party without external-party wallet; spec-shaped otherwise', async () => {
    expect((await refusal(validator.externalPartyBalance(carol.id))).status).toBe(404);
    const raw = await fetch(
      `${base}/v0/admin/external-party/balance?party_id=${encodeURIComponent(alice.id)}`,
    );
    const body = (await raw.json()) as { total_unlocked_coin: string };
    const spec = loadSpec(join(SPECS_DIR, 'splice-0.6.1/validator-internal.yaml'));
    expect(validateAgainst(spec, 'ExternalPartyBalanceResponse', body)).toEqual([]);
    expect(body.total_unlocked_coin).toBe('87.5000000000');
  });
});

describe('transfer preapprovals and users', () => {
  it('cancels the operator-provided preapproval; a second cancel is 404', async () => {
    net.tap(carol.id, '1'); // unrelated holdings do not matter
    const dave = await onboardTopology('dave');
    await acceptSetup(dave);
    await validator.cancelTransferPreapproval(dave.id);
    expect((await refusal(validator.lookupTransferPreapproval(dave.id))).status).toBe(404);
    expect((await refusal(validator.cancelTransferPreapproval(dave.id))).status).toBe(404);
  });

  it('onboards a local user with a party in the validator namespace, idempotently', async () => {
    const r = await validator.onboardUser({ name: 'erin@example.com' });
    expect(r.party_id).toBe(`erin_example_com::${net.validatorParty.split('::')[1]}`);
    expect(net.users.get('erin@example.com')?.actAs.has(r.party_id)).toBe(true);
    expect((await validator.onboardUser({ name: 'erin@example.com' })).party_id).toBe(r.party_id);
    const users = await validator.listUsers();
    expect(users.usernames).toContain('erin@example.com');
    const e = await refusal(validator.onboardUser({ name: 'fred', party_id: `fred::1220${'2'.repeat(64)}` }));
    expect(e.status).toBe(404);
  });
});

describe('automation: proposals and instruction expiry', () => {
  it('accepts a TransferPreapprovalProposal naming the validator as provider', async () => {
    net.commitInternal({
      archives: [],
      creates: [
        {
          ...amuletContract(net.dso, carol.id, '0', 0n),
          templateId: ID.preapprovalProposal,
          argument: record(ID.preapprovalProposal, [
            ['receiver', { kind: 'party', value: carol.id }],
            ['provider', { kind: 'party', value: net.validatorParty }],
          ]),
          signatories: [carol.id],
          stakeholders: [carol.id, net.validatorParty],
        },
      ],
      commandId: 'test-proposal',
    });
    await new Promise((r) => setImmediate(r));
    const pre = net.store
      .activeContracts('TransferPreapproval')
      .find((c) => str(c.argument, 'receiver') === carol.id)!;
    expect(big(pre.argument, 'expiresAt')! - big(pre.argument, 'validFrom')!).toBe(90n * 86_400_000_000n);
    expect(net.store.activeContracts('TransferPreapprovalProposal')).toEqual([]);
  });
});

/** An AmuletTransferInstruction from bob to carol, locking `amount` (as a two-step transfer leaves it). */
function makeInstruction(amount: string, executeBefore: bigint) {
  const now = net.clock.now();
  const round = net.latestRound().number;
  const inner = amuletContract(net.dso, bob.id, amount, round).argument;
  const locked = {
    ...amuletContract(net.dso, bob.id, amount, round),
    templateId: ID.lockedAmulet,
    argument: lockedAmuletRecord(inner, [net.dso], executeBefore, `transfer to '${carol.id}'`),
  };
  const instr = {
    ...amuletContract(net.dso, bob.id, amount, round),
    templateId: ID.transferInstruction,
    argument: record(ID.transferInstruction, [
      ['lockedAmulet', cid(locked.contractId)],
      [
        'transfer',
        tokenTransferRecord({
          sender: bob.id,
          receiver: carol.id,
          amount,
          admin: net.dso,
          instrument: 'Amulet',
          requestedAt: now,
          executeBefore,
          inputHoldingCids: [],
          meta: {},
        }),
      ],
    ]),
    signatories: [net.dso, bob.id],
    stakeholders: [net.dso, bob.id, carol.id],
  };
  net.commitInternal({ archives: [], creates: [locked, instr], commandId: 'test-instruction' });
  return { instr: instr.contractId, locked: locked.contractId };
}

describe('token-standard registry through the scan proxy', () => {
  const factoryArgs = (receiver: Party) => ({
    expectedAdmin: net.dso,
    transfer: {
      sender: alice.id,
      receiver: receiver.id,
      amount: '1.0',
      instrumentId: { admin: net.dso, id: 'Amulet' },
      requestedAt: new Date().toISOString(),
      executeBefore: new Date(Date.now() + 3_600_000).toISOString(),
      inputHoldingCids: [],
      meta: { values: {} },
    },
    extraArgs: { context: { values: {} }, meta: { values: {} } },
  });

  it('direct when the receiver has a TransferPreapproval, with the contexts the interpreter reads', async () => {
    const f = await registry.getTransferFactory({
      choiceArguments: factoryArgs(bob),
      excludeDebugFields: true,
    });
    expect(f.transferKind).toBe('direct');
    expect(f.factoryId).toBe(net.externalPartyAmuletRules().contractId);
    const values = f.choiceContext.choiceContextData.values as Record<
      string,
      { tag: string; value: unknown }
    >;
    expect(Object.keys(values).sort()).toEqual(['amulet-rules', 'open-round', 'transfer-preapproval']);
    expect(values['open-round']).toEqual({ tag: 'AV_ContractId', value: net.latestRound().contractId });
    const pre = net.store.get(values['transfer-preapproval']!.value as string)!;
    expect(str(pre.argument, 'receiver')).toBe(bob.id);
    const disclosed = f.choiceContext.disclosedContracts.map((d) => d.contractId);
    expect(disclosed).toContain(f.factoryId);
    expect(disclosed).toContain(pre.contractId);
    expect(f.choiceContext.disclosedContracts[0]).not.toHaveProperty('debugPayload');
  });

  it('offer when it has none; the raw answer matches the registry OpenAPI', async () => {
    const dave = await onboardTopology('dave2');
    const raw = await fetch(`${base}/v0/scan-proxy/registry/transfer-instruction/v1/transfer-factory`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ choiceArguments: factoryArgs(dave) }),
    });
    expect(raw.status).toBe(200);
    const body = (await raw.json()) as {
      transferKind: string;
      choiceContext: {
        choiceContextData: { values: Record<string, unknown> };
        disclosedContracts: { debugPackageName?: string }[];
      };
    };
    expect(body.transferKind).toBe('offer');
    expect(Object.keys(body.choiceContext.choiceContextData.values).sort()).toEqual([
      'amulet-rules',
      'open-round',
    ]);
    expect(body.choiceContext.disclosedContracts[0]?.debugPackageName).toBe('splice-amulet');
    const spec = loadSpec(join(SPECS_DIR, 'splice-0.6.1/transfer-instruction-v1.yaml'));
    expect(validateAgainst(spec, 'TransferFactoryWithChoiceContext', body)).toEqual([]);
  });

  it('refuses another admin (400)', async () => {
    const e = await refusal(
      registry.getTransferFactory({ choiceArguments: { ...factoryArgs(bob), expectedAdmin: alice.id } }),
    );
    expect(e.status).toBe(400);
    expect(e.service).toBe('registry');
  });

  it('choice contexts of an instruction; unknown instruction 404; expiry returns the amulet', async () => {
    const { instr, locked } = makeInstruction('3', net.clock.now() + 60_000_000n);
    for (const get of [
      () => registry.getTransferInstructionAcceptContext(instr),
      () => registry.getTransferInstructionRejectContext(instr),
      () => registry.getTransferInstructionWithdrawContext(instr),
    ]) {
      const c = await get();
      expect(c.choiceContextData).toEqual({
        values: {
          'amulet-rules': { tag: 'AV_ContractId', value: net.amuletRules().contractId },
          'open-round': { tag: 'AV_ContractId', value: net.latestRound().contractId },
          'expire-lock': { tag: 'AV_Bool', value: true },
        },
      });
      expect(c.disclosedContracts.map((d) => d.contractId).sort()).toEqual(
        [net.amuletRules().contractId, net.latestRound().contractId].sort(),
      );
    }
    const e = await refusal(registry.getTransferInstructionAcceptContext(`00${'9'.repeat(64)}`));
    expect(e.status).toBe(404);
    const bobBefore = unlocked(bob);
    net.sweep();
    expect(net.store.get(instr)).toBeDefined(); // not yet expired
    net.clock.advance(61_000);
    net.sweep();
    expect(net.store.get(instr)).toBeUndefined();
    expect(net.store.get(locked)).toBeUndefined();
    expect(balanceOf(net.store, bob.id, net.latestRound().number).totalUnlocked).toBe(
      (Number(bobBefore) + 3).toFixed(10),
    );
  });
});
