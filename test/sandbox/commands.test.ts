/**
 * Commands the Wallet SDK's standard flows submit beyond transfers: the
 * built-in Ping (create and archive by an external party through prepare and
 * execute, hashes recomputed by our hasher and by @canton-network/core-tx-visualizer,
 * shape of the real vector), classic submit-and-wait by the validator operator
 * (three response forms, deduplication), TransferPreapproval_Renew by the
 * provider (fee burnt, expiry moved) and TransferPreapproval_Cancel by the
 * receiver, and the refusals Canton gives (external submitter, wrong
 * controller, archived contract). Responses are checked against both specs.
 */
import { randomUUID, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { hashPreparedTransaction as visualizerHash } from '@canton-network/core-tx-visualizer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { base64ToBytes, bytesToBase64, bytesToHex } from '../../src/hashing/input.js';
import type { DecodedTransaction, Value } from '../../src/hashing/model.js';
import { hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import { addAmounts, holdingsOf, subAmounts, transferPreapprovalContract } from '../../src/sandbox/amulet.js';
import { isoMicros } from '../../src/sandbox/ledger/clock.js';
import type { Contract } from '../../src/sandbox/ledger/store.js';
import { big, identifierString, str } from '../../src/sandbox/ledger/value-json.js';
import { LEDGER_API_USER, type SandboxNetwork, VALIDATOR_USER } from '../../src/sandbox/network.js';
import { preapprovalFee } from '../../src/sandbox/participant/interpret.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { loadSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';
import { addExternalParty, type TestParty } from '../support/sandbox-party.js';
import { VECTORS_DIR } from '../support/vectors.js';

const specs = ['openapi-3.4.12.yaml', 'openapi-3.5.1.yaml'].map((f) =>
  loadSpec(join(SPECS_DIR, 'canton-ledger-api', f)),
);
const PING = '#canton-builtin-admin-workflow-ping:Canton.Internal.Ping:Ping';
const DAY_US = 86_400_000_000n;

let sb: RunningSandbox;
let net: SandboxNetwork;
let alice: TestParty;
let bob: TestParty;

function addParty(hint: string): TestParty {
  return addExternalParty(net, hint);
}

type Json = Record<string, unknown>;

async function post(path: string, body: unknown): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${sb.urls.ledgerApi}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as Json) : {} };
}

function valid(component: string, value: unknown): void {
  for (const spec of specs) expect(validateAgainst(spec, component, value)).toEqual([]);
}

async function prepare(p: TestParty, command: unknown, disclosedContracts: unknown[] = []) {
  const r = await post('/v2/interactive-submission/prepare', {
    userId: LEDGER_API_USER,
    commandId: randomUUID(),
    actAs: [p.id],
    synchronizerId: net.synchronizerId,
    commands: [command],
    disclosedContracts,
    packageIdSelectionPreference: [],
  });
  return r;
}

/** Prepare as `p` and check the hash both ways (ours and core-tx-visualizer's). */
async function prepareChecked(p: TestParty, command: unknown, disclosed: unknown[] = []) {
  const r = await prepare(p, command, disclosed);
  expect(r.status, JSON.stringify(r.json)).toBe(200);
  valid('JsPrepareSubmissionResponse', r.json);
  const tx = r.json.preparedTransaction as string;
  const ours = hashPreparedTransaction(tx, { scheme: 'v2' });
  expect(bytesToBase64(ours)).toBe(r.json.preparedTransactionHash);
  expect(await visualizerHash(tx, 'hex')).toBe(bytesToHex(ours));
  return { tx, hash: ours };
}

/** Sign the hash as `p` and executeAndWait. */
function executeSigned(p: TestParty, tx: string, hash: Uint8Array) {
  return post('/v2/interactive-submission/executeAndWait', {
    preparedTransaction: tx,
    partySignatures: {
      signatures: [
        {
          party: p.id,
          signatures: [
            {
              format: 'SIGNATURE_FORMAT_CONCAT',
              signature: bytesToBase64(sign(null, hash, p.key)),
              signedBy: p.fp,
              signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_ED25519',
            },
          ],
        },
      ],
    },
    hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
    submissionId: randomUUID(),
    userId: LEDGER_API_USER,
    deduplicationPeriod: { Empty: {} },
  });
}

async function prepareAndExecute(p: TestParty, command: unknown, disclosed: unknown[] = []) {
  const { tx, hash } = await prepareChecked(p, command, disclosed);
  const ex = await executeSigned(p, tx, hash);
  expect(ex.status, JSON.stringify(ex.json)).toBe(200);
  valid('ExecuteSubmissionAndWaitResponse', ex.json);
  return { decoded: decodePreparedTransaction(tx), offset: ex.json.completionOffset as number };
}

/** A classic submission as the validator operator (what the SDK's ledger.internal.submit sends). */
function submitAsValidator(path: string, command: unknown, extra: Json = {}, disclosed: unknown[] = []) {
  const commands = {
    commands: [command],
    commandId: randomUUID(),
    userId: VALIDATOR_USER,
    actAs: [net.validatorParty],
    readAs: [],
    disclosedContracts: disclosed,
    synchronizerId: net.synchronizerId,
    packageIdSelectionPreference: [],
    ...extra,
  };
  return post(path, path.endsWith('for-transaction') ? { commands } : commands);
}

const pingCreate = (initiator: string, id = randomUUID()) => ({
  CreateCommand: { templateId: PING, createArguments: { id, initiator, responder: initiator } },
});
const pingArchive = (contractId: string) => ({
  ExerciseCommand: { templateId: PING, contractId, choice: 'Archive', choiceArgument: {} },
});
const activePings = () => net.store.activeContracts('Ping');

/** Record labels, package and template of every node: the shape the vector and ours must share. */
function nodeShapes(tx: DecodedTransaction) {
  const labels = (v: Value): string[] => (v.kind === 'record' ? v.fields.map((f) => f.label ?? '') : []);
  return tx.transaction.nodes.map(({ node }) =>
    node.type === 'create'
      ? {
          type: node.type,
          packageName: node.packageName,
          templateId: node.templateId,
          labels: labels(node.argument),
          kinds: node.argument.kind === 'record' ? node.argument.fields.map((f) => f.value.kind) : [],
          signatories: node.signatories.length,
          stakeholders: node.stakeholders.length,
        }
      : { type: node.type },
  );
}

beforeAll(async () => {
  sb = await startSandbox({ seed: 'commands-test', timers: false });
  net = sb.ctx.net;
  alice = addParty('alice');
  bob = addParty('bob');
});
afterAll(async () => sb?.close());

describe('Canton.Internal.Ping by an external party (prepare / execute)', () => {
  it('creates the Ping shaped like the real vector and archives it', async () => {
    const vector = JSON.parse(
      readFileSync(join(VECTORS_DIR, 'real', 'v2_canton_network_wallet_sdk_utils_ping.json'), 'utf8'),
    ) as { prepared_transaction_base64: string };
    const real = decodePreparedTransaction(base64ToBytes(vector.prepared_transaction_base64));
    const id = randomUUID();
    const { decoded } = await prepareAndExecute(alice, pingCreate(alice.id, id));
    expect(nodeShapes(decoded)).toEqual(nodeShapes(real));
    expect(decoded.metadata.inputContracts).toEqual([]);
    const ping = activePings().find((c) => str(c.argument, 'id') === id);
    expect(ping && str(ping.argument, 'initiator')).toBe(alice.id);
    expect(ping!.signatories).toEqual([alice.id]);

    const archived = await prepareAndExecute(alice, pingArchive(ping!.contractId));
    const root = archived.decoded.transaction.nodes[0]!.node;
    expect(root.type === 'exercise' && root.choiceId).toBe('Archive');
    expect(net.store.get(ping!.contractId)).toBeUndefined();
    // The archive shows on the update stream like any contract's.
    const up = await post('/v2/updates/update-by-offset', {
      offset: archived.offset,
      updateFormat: {
        includeTransactions: {
          eventFormat: { filtersByParty: { [alice.id]: {} }, verbose: true },
          transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
        },
      },
    });
    expect(up.status, JSON.stringify(up.json)).toBe(200);
    const events = ((up.json.update as Json).Transaction as Json).value as Json;
    expect((events.events as Json[]).map((e) => Object.keys(e)[0])).toEqual(['ArchivedEvent']);
  });

  it('refuses a Ping whose initiator is not the submitter, and an archive by a non-stakeholder', async () => {
    const r = await prepare(alice, pingCreate(bob.id));
    expect(r.status).toBe(400);
    expect(r.json.cause).toMatch(`missing authorization from ${bob.id}`);
    await prepareAndExecute(bob, pingCreate(bob.id));
    const bobs = activePings().find((c) => str(c.argument, 'initiator') === bob.id)!;
    const a = await prepare(alice, pingArchive(bobs.contractId));
    expect(a.json.code).toBe('CONTRACT_NOT_FOUND');
  });
});

describe('submit-and-wait by the validator operator', () => {
  it('answers in the three forms, records the completion and deduplicates', async () => {
    const plain = await submitAsValidator('/v2/commands/submit-and-wait', pingCreate(net.validatorParty));
    expect(plain.status, JSON.stringify(plain.json)).toBe(200);
    valid('SubmitAndWaitResponse', plain.json);
    const done = net.store.completions(0).find((c) => c.updateId === plain.json.updateId);
    expect(done?.offset).toBe(plain.json.completionOffset);
    expect(done?.actAs).toEqual([net.validatorParty]);
    expect(done?.status.code).toBe(0);

    const withTx = await submitAsValidator(
      '/v2/commands/submit-and-wait-for-transaction',
      pingCreate(net.validatorParty),
    );
    expect(withTx.status, JSON.stringify(withTx.json)).toBe(200);
    valid('JsSubmitAndWaitForTransactionResponse', withTx.json);
    const created = ((withTx.json.transaction as Json).events as Json[])[0]!.CreatedEvent as Json;
    expect(created.templateId).toMatch(/:Canton\.Internal\.Ping:Ping$/);
    expect(created.signatories).toEqual([net.validatorParty]);

    const tree = await submitAsValidator(
      '/v2/commands/submit-and-wait-for-transaction-tree',
      pingArchive(created.contractId as string),
    );
    expect(tree.status, JSON.stringify(tree.json)).toBe(200);
    valid('JsSubmitAndWaitForTransactionTreeResponse', tree.json);
    const ev = (tree.json.transactionTree as Json).eventsById as Record<string, Json>;
    expect((ev['0']!.ExercisedTreeEvent as Json).value).toMatchObject({ choice: 'Archive', consuming: true });
    expect(net.store.get(created.contractId as string)).toBeUndefined();

    const commandId = randomUUID();
    const first = await submitAsValidator('/v2/commands/submit-and-wait', pingCreate(net.validatorParty), {
      commandId,
    });
    expect(first.status).toBe(200);
    const again = await submitAsValidator('/v2/commands/submit-and-wait', pingCreate(net.validatorParty), {
      commandId,
    });
    expect(again.json.code).toBe('DUPLICATE_COMMAND');

    const async = await submitAsValidator('/v2/commands/async/submit', pingCreate(net.validatorParty));
    expect(async.status).toBe(200);
    valid('SubmitResponse', async.json);
  });

  it('refuses an external submitter and a party the user may not act as', async () => {
    const r = await post('/v2/commands/submit-and-wait', {
      commands: [pingCreate(alice.id)],
      commandId: randomUUID(),
      userId: LEDGER_API_USER,
      actAs: [alice.id],
    });
    expect(r.json.code).toBe('NO_SYNCHRONIZER_ON_WHICH_ALL_SUBMITTERS_CAN_SUBMIT');
    const d = await post('/v2/commands/submit-and-wait', {
      commands: [pingCreate(net.dso)],
      commandId: randomUUID(),
      userId: VALIDATOR_USER,
      actAs: [net.dso],
    });
    expect(d.status).toBe(403);
  });
});

describe('TransferPreapproval_Renew and _Cancel', () => {
  let pre: Contract;
  const disclosed = (c: Contract) => ({
    templateId: identifierString(c.templateId),
    contractId: c.contractId,
    createdEventBlob: c.createdEventBlob,
    synchronizerId: net.synchronizerId,
  });
  /** The command core-amulet-service's renewTransferPreapproval builds, and its disclosures. */
  const renewCommand = (c: Contract, newExpiresAt: bigint, inputs: string[]) => {
    const rules = net.amuletRules();
    const round = net.latestRound().contract;
    return {
      command: {
        ExerciseCommand: {
          templateId: identifierString(c.templateId),
          contractId: c.contractId,
          choice: 'TransferPreapproval_Renew',
          choiceArgument: {
            context: {
              context: {
                openMiningRound: round.contractId,
                issuingMiningRounds: [],
                validatorRights: [],
                featuredAppRight: null,
              },
              amuletRules: rules.contractId,
            },
            inputs: inputs.map((value) => ({ tag: 'InputAmulet', value })),
            newExpiresAt: isoMicros(newExpiresAt),
          },
        },
      },
      disclosed: [disclosed(rules), disclosed(round)],
    };
  };
  const cancelCommand = (c: Contract, p: string) => ({
    ExerciseCommand: {
      templateId: identifierString(c.templateId),
      contractId: c.contractId,
      choice: 'TransferPreapproval_Cancel',
      choiceArgument: { p },
    },
  });
  const validatorBalance = () => {
    const round = net.latestRound().number;
    return addAmounts('0', ...holdingsOf(net.store, net.validatorParty, round).map((h) => h.amount));
  };

  beforeAll(() => {
    const u = net.commitInternal({
      archives: [],
      creates: [transferPreapprovalContract(net.dso, bob.id, net.validatorParty, net.clock.now())],
      commandId: 'test-preapproval',
    });
    pre = u.events[0]!.contract;
  });

  it('renews as the provider: the fee for the extension is burnt and expiresAt moves', async () => {
    const old = big(pre.argument, 'expiresAt')!;
    expect(old - big(pre.argument, 'validFrom')!).toBe(90n * DAY_US);
    const before = validatorBalance();
    const inputs = holdingsOf(net.store, net.validatorParty, net.latestRound().number).map(
      (h) => h.contract.contractId,
    );
    const newExpiresAt = old + 2n * DAY_US;
    const { command, disclosed: ds } = renewCommand(pre, newExpiresAt, inputs);
    const r = await submitAsValidator('/v2/commands/submit-and-wait', command, {}, ds);
    expect(r.status, JSON.stringify(r.json)).toBe(200);
    valid('SubmitAndWaitResponse', r.json);
    expect(net.store.get(pre.contractId)).toBeUndefined();
    const renewed = net.store
      .activeContracts('Splice.AmuletRules:TransferPreapproval')
      .find((c) => str(c.argument, 'receiver') === bob.id)!;
    expect(big(renewed.argument, 'expiresAt')).toBe(newExpiresAt);
    expect(big(renewed.argument, 'validFrom')).toBe(big(pre.argument, 'validFrom'));
    // 2 days at 0.00274 USD/day at 0.005 USD/CC.
    expect(preapprovalFee(2n * DAY_US, '0.005')).toBe('1.0960000000');
    expect(subAmounts(before, validatorBalance())).toBe('1.0960000000');
    pre = renewed;
  });

  it('refuses a renewal by the receiver, a cancel for someone else, and a renewal of an archived one', async () => {
    const { command, disclosed: ds } = renewCommand(pre, net.clock.now() + 100n * DAY_US, []);
    const byBob = await prepare(bob, command, ds);
    expect(byBob.status).toBe(400);
    expect(byBob.json.cause).toMatch(`missing authorization from ${net.validatorParty}`);
    const wrongP = await submitAsValidator('/v2/commands/submit-and-wait', cancelCommand(pre, bob.id));
    expect(wrongP.json.code).toBe('DAML_AUTHORIZATION_ERROR');
    expect(wrongP.json.cause).toMatch(`missing authorization from ${bob.id}`);
    const byAlice = await prepare(alice, cancelCommand(pre, alice.id));
    expect(byAlice.json.code).toBe('CONTRACT_NOT_FOUND');
  });

  it('cancels as the receiver through prepare / execute; the archived one is gone for good', async () => {
    const { decoded } = await prepareAndExecute(bob, cancelCommand(pre, bob.id));
    const root = decoded.transaction.nodes[0]!.node;
    expect(root.type === 'exercise' && [root.choiceId, root.consuming, root.actingParties]).toEqual([
      'TransferPreapproval_Cancel',
      true,
      [bob.id],
    ]);
    expect(net.store.get(pre.contractId)).toBeUndefined();
    const again = await submitAsValidator(
      '/v2/commands/submit-and-wait',
      cancelCommand(pre, net.validatorParty),
    );
    expect(again.json.code).toBe('CONTRACT_NOT_FOUND');
  });

  it('a provider cancel wins over a receiver cancel prepared earlier: LOCAL_VERDICT_INACTIVE_CONTRACTS', async () => {
    const c = net.commitInternal({
      archives: [],
      creates: [transferPreapprovalContract(net.dso, bob.id, net.validatorParty, net.clock.now())],
      commandId: 'test-preapproval-2',
    }).events[0]!.contract;
    const { tx, hash } = await prepareChecked(bob, cancelCommand(c, bob.id));
    const byProvider = await submitAsValidator(
      '/v2/commands/submit-and-wait-for-transaction',
      cancelCommand(c, net.validatorParty),
    );
    expect(byProvider.status, JSON.stringify(byProvider.json)).toBe(200);
    const events = (byProvider.json.transaction as Json).events as Json[];
    expect(events.map((e) => Object.keys(e)[0])).toEqual(['ArchivedEvent']);
    expect((events[0]!.ArchivedEvent as Json).contractId).toBe(c.contractId);
    const late = await executeSigned(bob, tx, hash);
    expect(late.json.code).toBe('LOCAL_VERDICT_INACTIVE_CONTRACTS');
  });

  it('an expired preapproval can be neither cancelled nor renewed', async () => {
    const now = net.clock.now();
    const c = net.commitInternal({
      archives: [],
      creates: [
        transferPreapprovalContract(net.dso, bob.id, net.validatorParty, now - 2n * DAY_US, now - 1n),
      ],
      commandId: 'test-preapproval-expired',
    }).events[0]!.contract;
    const cancel = await prepare(bob, cancelCommand(c, bob.id));
    expect(cancel.json.cause).toMatch('TransferPreapproval.expiresAt');
    const { command, disclosed: ds } = renewCommand(c, now + DAY_US, []);
    const renew = await submitAsValidator('/v2/commands/submit-and-wait', command, {}, ds);
    expect(renew.json.code).toBe('DAML_INTERPRETATION_ERROR');
    expect(net.store.get(c.contractId)).toBeDefined();
  });
});
