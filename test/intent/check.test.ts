/**
 * The intent check (src/intent/check.ts): for every kind the matching intent
 * passes (real vectors and sandbox builders); then each mismatch is refused
 * with the right reason — by a wrong intent, or by a transaction tampered with
 * src/sandbox/tamper.ts or edited as a model and re-encoded.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { DecodedTransaction, NodeBody, PreparedTransaction, Value } from '../../src/hashing/model.js';
import { isoMicros, templateName, valueToJson } from '../../src/hashing/render.js';
import { checkIntent } from '../../src/intent/check.js';
import { addDecimals, compareDecimals, decimalEquals } from '../../src/intent/decimal.js';
import { type Intent, type IntentProblemReason, IntentSchema } from '../../src/intent/model.js';
import { parseInstantMicros, sameInstant } from '../../src/intent/time.js';
import { SandboxNetwork } from '../../src/sandbox/network.js';
import {
  archiveNode,
  exerciseNode,
  ID,
  num,
  PACKAGE_NAME,
  record,
  text,
  unit,
} from '../../src/sandbox/prepared/common.js';
import { tamper } from '../../src/sandbox/tamper.js';
import {
  ALICE,
  BOB,
  buildAccept,
  buildPreapprovalSend,
  buildProposal,
  buildReject,
  buildSetupAccept,
  buildTransfer,
  buildWithdraw,
  CAROL,
  createOf,
  DSO,
  decoded,
  EXECUTE_BEFORE,
  editNode,
  existing,
  findNode,
  graft,
  INSTRUCTION_CID,
  MALLORY,
  mapValue,
  modelOf,
  PREAPPROVAL_CID,
  realFiles,
  realVector,
  SEND_EXPIRES,
  SETUP_CID,
  SETUP_EXPIRES,
  setField,
  swapParty,
  T0,
  VALIDATOR,
} from './fixtures.js';

// biome-ignore lint/suspicious/noExplicitAny: plain JSON navigation in the independent reader
type J = any;
const REASON = 'splice.lfdecentralizedtrust.org/reason';

const reasons = (tx: DecodedTransaction, intent: Intent): IntentProblemReason[] =>
  checkIntent(tx, IntentSchema.parse(intent)).problems.map((p) => p.reason);

/** The choice's `extraArgs.meta` text as an intent states it (nothing when there is none). */
const extraMeta = (arg: J): { meta?: Record<string, string> } => {
  const values = arg.extraArgs?.meta?.values ?? {};
  return Object.keys(values).length > 0 ? { meta: { ...values } } : {};
};

/** The intent a caller would give for a real vector, read from its JSON by plain property access. */
function intentForVector(tx: DecodedTransaction): Intent {
  const root = tx.nodeById.get(tx.transaction.roots[0]!)!;
  const party = tx.metadata.submitterInfo.actAs[0]!;
  if (root.type === 'create') {
    const arg: J = valueToJson(root.argument);
    if (root.templateId.entityName === 'TransferPreapprovalProposal')
      return { kind: 'preapproval-proposal', receiver: arg.receiver, provider: arg.provider };
    return { kind: 'create', party, template: templateName(root.packageName, root.templateId) };
  }
  if (root.type !== 'exercise') throw new Error('unexpected root');
  const arg: J = valueToJson(root.chosenValue);
  const input = (cid: string): J => {
    const ic = tx.metadata.inputContracts.find((c) => c.contract.contractId === cid);
    return ic && valueToJson(ic.contract.argument);
  };
  switch (root.choiceId) {
    case 'TransferFactory_Transfer': {
      const t = arg.transfer;
      const memo = t.meta.values[REASON];
      return {
        kind: 'transfer',
        sender: t.sender,
        receiver: t.receiver,
        amount: t.amount,
        instrument: t.instrumentId,
        ...(memo === undefined ? {} : { memo }),
        executeBefore: t.executeBefore,
        inputs: t.inputHoldingCids,
      };
    }
    case 'TransferInstruction_Accept':
      return { kind: 'transfer-instruction-accept', party, instructionCid: root.contractId };
    case 'TransferInstruction_Reject':
      return { kind: 'transfer-instruction-reject', party, instructionCid: root.contractId };
    case 'TransferInstruction_Withdraw':
      return { kind: 'transfer-instruction-withdraw', party, instructionCid: root.contractId };
    case 'ExternalPartySetupProposal_Accept':
      return {
        kind: 'setup-proposal-accept',
        party,
        proposalCid: root.contractId,
        validator: input(root.contractId).validator,
      };
    case 'AllocationFactory_Allocate': {
      const { settlement, transferLeg, transferLegId } = arg.allocation;
      return {
        kind: 'allocation-allocate',
        party,
        receiver: transferLeg.receiver,
        amount: transferLeg.amount,
        instrument: transferLeg.instrumentId,
        executor: settlement.executor,
        settlementRef: {
          id: settlement.settlementRef.id,
          ...(settlement.settlementRef.cid == null ? {} : { cid: settlement.settlementRef.cid }),
        },
        transferLegId,
        // The venue's metadata text, as the allocation request states it.
        meta: { ...settlement.meta.values, ...transferLeg.meta.values },
      };
    }
    case 'Allocation_Withdraw':
      return {
        kind: 'allocation-withdraw',
        party,
        contractId: root.contractId,
        amount: input(root.contractId).allocation.transferLeg.amount,
        ...extraMeta(arg),
      };
    case 'AllocationRequest_Reject':
      return { kind: 'allocation-request-reject', party, contractId: root.contractId, ...extraMeta(arg) };
    default:
      return {
        kind: 'exercise',
        party,
        template: `#${templateName(root.packageName, root.templateId)}`,
        choice: root.choiceId,
        contractId: root.contractId,
      };
  }
}

describe('checkIntent: the matching intent passes', () => {
  for (const file of realFiles)
    it(`real vector ${file}`, () => {
      const tx = realVector(file);
      const r = checkIntent(tx, IntentSchema.parse(intentForVector(tx)));
      expect(r.problems).toEqual([]);
      expect(r.actions).toHaveLength(1);
    });

  const transferIntent = (o: Partial<Intent & { kind: 'transfer' }> = {}): Intent => ({
    kind: 'transfer',
    sender: ALICE,
    receiver: BOB,
    amount: '7.25',
    instrument: { admin: DSO, id: 'Amulet' },
    memo: 'invoice 42',
    executeBefore: isoMicros(EXECUTE_BEFORE),
    inputs: [existing('h0')],
    ...o,
  });

  it('sandbox direct and two-step transfers, with every optional field', () => {
    expect(reasons(decoded(buildTransfer('direct')), transferIntent({ transferKind: 'direct' }))).toEqual([]);
    expect(reasons(decoded(buildTransfer('twoStep')), transferIntent({ transferKind: 'offer' }))).toEqual([]);
    // Optional fields left out: nothing more is checked (an empty reason is no memo).
    const bare: Intent = {
      kind: 'transfer',
      sender: ALICE,
      receiver: BOB,
      amount: '7.25',
      instrument: { admin: DSO, id: 'Amulet' },
    };
    expect(reasons(decoded(buildTransfer('direct', { reason: '' })), bare)).toEqual([]);
    expect(reasons(decoded(buildTransfer('twoStep', { reason: '' })), bare)).toEqual([]);
  });

  it('equal values written differently pass: amount scale, instant offset', () => {
    const tx = decoded(buildTransfer('direct', { amount: '12.5' }));
    const later = new Date(Number(EXECUTE_BEFORE / 1000n) + 3_600_000).toISOString().slice(0, 19);
    expect(reasons(tx, transferIntent({ amount: '12.5000000000', executeBefore: `${later}+01:00` }))).toEqual(
      [],
    );
    expect(reasons(tx, transferIntent({ amount: '12.50' }))).toEqual([]);
  });

  it('sandbox instruction accept / reject / withdraw', () => {
    expect(
      reasons(decoded(buildAccept()), {
        kind: 'transfer-instruction-accept',
        party: BOB,
        instructionCid: INSTRUCTION_CID,
      }),
    ).toEqual([]);
    expect(
      reasons(decoded(buildReject()), {
        kind: 'transfer-instruction-reject',
        party: BOB,
        instructionCid: INSTRUCTION_CID,
      }),
    ).toEqual([]);
    expect(
      reasons(decoded(buildWithdraw()), {
        kind: 'transfer-instruction-withdraw',
        party: ALICE,
        instructionCid: INSTRUCTION_CID,
      }),
    ).toEqual([]);
  });

  it('sandbox preapproval send, setup acceptance and preapproval proposal', () => {
    const send: Intent = {
      kind: 'preapproval-send',
      sender: ALICE,
      receiver: BOB,
      amount: '3.5',
      nonce: 4,
      expiresAt: isoMicros(SEND_EXPIRES),
      description: 'rent',
    };
    expect(reasons(decoded(buildPreapprovalSend()), send)).toEqual([]);
    expect(
      reasons(decoded(buildSetupAccept()), {
        kind: 'setup-proposal-accept',
        party: ALICE,
        proposalCid: SETUP_CID,
        validator: VALIDATOR,
      }),
    ).toEqual([]);
    expect(
      reasons(decoded(buildProposal()), { kind: 'preapproval-proposal', receiver: BOB, provider: VALIDATOR }),
    ).toEqual([]);
  });
});

// ---- refusals ---------------------------------------------------------------------------------------

const net = new SandboxNetwork({ seed: 'intent-check' });

const TRANSFER: Intent = {
  kind: 'transfer',
  sender: ALICE,
  receiver: BOB,
  amount: '7.25',
  instrument: { admin: DSO, id: 'Amulet' },
  memo: 'invoice 42',
  executeBefore: isoMicros(EXECUTE_BEFORE),
  inputs: [existing('h0')],
};
const withT = (o: Record<string, unknown>): Intent => ({ ...TRANSFER, ...o }) as Intent;
const direct = () => buildTransfer('direct');

/** Replaces every value `f` maps (depth first) in every node's argument / chosen value. */
function mapValues(p: PreparedTransaction, f: (v: Value) => Value | undefined): PreparedTransaction {
  const walk = (v: Value): Value => {
    const r = f(v);
    if (r) return r;
    switch (v.kind) {
      case 'record':
        return { ...v, fields: v.fields.map((x) => ({ label: x.label, value: walk(x.value) })) };
      case 'optional':
        return v.value === undefined ? v : { kind: 'optional', value: walk(v.value) };
      case 'list':
        return { kind: 'list', elements: v.elements.map(walk) };
      case 'variant':
        return { ...v, value: walk(v.value) };
      case 'textMap':
        return { kind: 'textMap', entries: v.entries.map((e) => ({ key: e.key, value: walk(e.value) })) };
      default:
        return v;
    }
  };
  const nodes = p.transaction.nodes.map(({ nodeId, node }) => ({
    nodeId,
    node:
      node.type === 'exercise'
        ? { ...node, chosenValue: walk(node.chosenValue) }
        : node.type === 'create'
          ? { ...node, argument: walk(node.argument) }
          : node,
  }));
  return { ...p, transaction: { ...p.transaction, nodes } };
}

describe('checkIntent: each mismatch is refused with its reason', () => {
  it('wrong receiver in the intent, and a transaction tampered to pay mallory', () => {
    const r = checkIntent(decoded(direct()), withT({ receiver: CAROL }));
    expect(r.problems.map((p) => p.reason)).toContain('party_mismatch');
    const msg = r.problems.find((p) => p.reason === 'party_mismatch')!.message;
    expect(msg).toBe(`receiver is ${BOB} but the intent says ${CAROL}.`);
    // CAROL owns none of the created holdings; BOB (not in the intent) does.
    expect(r.problems.map((p) => p.reason)).toContain('unexplained_create');

    for (const mode of ['direct', 'twoStep'] as const) {
      const tampered = decoded(tamper(net, buildTransfer(mode), 'receiver'));
      const rs = reasons(tampered, TRANSFER);
      expect(rs).toContain('party_mismatch');
      if (mode === 'direct') expect(rs).toContain('unexplained_create');
    }
  });

  it('wrong amount in the intent, and a tampered amount', () => {
    expect(reasons(decoded(direct()), withT({ amount: '7.26' }))).toContain('amount_mismatch');
    const r = checkIntent(decoded(tamper(net, direct(), 'amount')), TRANSFER);
    expect(r.problems.map((p) => p.reason)).toContain('amount_mismatch');
    expect(r.problems.find((p) => p.reason === 'amount_mismatch')!.message).toMatch(
      /^amount is 72\.5\d* but the intent says 7\.25\.$/,
    );
  });

  it('the receiver is credited less than the declared amount (direct transfer)', () => {
    // Only the receiver's created Amulet changes; the factory argument still says 7.25.
    const p = direct();
    const nodes = p.transaction.nodes.map((n) => {
      if (n.node.type !== 'create') return n;
      const arg = valueToJson(n.node.argument) as J;
      if (arg.owner !== BOB) return n;
      const lower = mapValues({ ...p, transaction: { ...p.transaction, nodes: [n] } }, (x) =>
        x.kind === 'numeric' && x.value === '7.2500000000'
          ? { kind: 'numeric', value: '7.2400000000' }
          : undefined,
      );
      return lower.transaction.nodes[0]!;
    });
    const r = checkIntent(decoded({ ...p, transaction: { ...p.transaction, nodes } }), TRANSFER);
    expect(r.problems).toEqual([
      {
        reason: 'amount_mismatch',
        message: `the direct transfer creates 7.2400000000 for ${BOB} but the intent says 7.25.`,
        where: 'node 0: receiver holdings',
      },
    ]);
  });

  it('wrong instrument in the intent, and an instrument changed in the transaction', () => {
    expect(reasons(decoded(direct()), withT({ instrument: { admin: DSO, id: 'Bitcoin' } }))).toEqual([
      'instrument_mismatch',
    ]);
    expect(reasons(decoded(direct()), withT({ instrument: { admin: CAROL, id: 'Amulet' } }))).toEqual([
      'instrument_mismatch',
    ]);
    const changed = mapValues(direct(), (v) =>
      v.kind === 'text' && v.value === 'Amulet' ? { kind: 'text', value: 'Amulet2' } : undefined,
    );
    expect(reasons(decoded(changed), TRANSFER)).toEqual(['instrument_mismatch']);
  });

  it('wrong memo; no memo in the intent refuses a non-empty reason (a party signs no text it did not ask for)', () => {
    expect(reasons(decoded(direct()), withT({ memo: 'invoice 43' }))).toEqual(['memo_mismatch']);
    const { memo: _, ...noMemo } = TRANSFER as Intent & { kind: 'transfer' };
    const r = checkIntent(decoded(direct()), noMemo);
    expect(r.problems).toEqual([
      {
        reason: 'memo_mismatch',
        message: 'the memo is "invoice 42" but the intent gives none.',
        where: 'node 0: memo',
      },
    ]);
    expect(reasons(decoded(buildTransfer('direct', { reason: '' })), noMemo)).toEqual([]);
    // The same for an offer: its instruction carries the reason too (reported once, at the root).
    expect(reasons(decoded(buildTransfer('twoStep')), noMemo)).toEqual(['memo_mismatch']);
    // And for a preapproval send's description.
    const send: Intent = {
      kind: 'preapproval-send',
      sender: ALICE,
      receiver: BOB,
      amount: '3.5',
      nonce: 4,
      expiresAt: isoMicros(SEND_EXPIRES),
    };
    expect(reasons(decoded(buildPreapprovalSend()), send)).toEqual(['memo_mismatch']);
    expect(reasons(decoded(buildPreapprovalSend(4n, null)), send)).toEqual([]);
  });

  it('wrong executeBefore (one microsecond later)', () => {
    expect(reasons(decoded(direct()), withT({ executeBefore: isoMicros(EXECUTE_BEFORE + 1n) }))).toEqual([
      'deadline_mismatch',
    ]);
  });

  it('wrong inputs (different, fewer, more)', () => {
    expect(reasons(decoded(direct()), withT({ inputs: [existing('other')] }))).toContain('inputs_mismatch');
    expect(reasons(decoded(direct()), withT({ inputs: [existing('h0'), existing('h1')] }))).toContain(
      'inputs_mismatch',
    );
    const two = decoded(buildTransfer('twoStep', { inputs: ['10', '10'] }));
    expect(reasons(two, withT({ inputs: [existing('h1')] }))).toContain('inputs_mismatch');
    expect(reasons(two, withT({ inputs: [existing('h1'), existing('h0')] }))).toEqual([]);
  });

  it('wrong transfer kind', () => {
    expect(reasons(decoded(direct()), withT({ transferKind: 'offer' }))).toEqual(['transfer_kind_mismatch']);
    expect(reasons(decoded(buildTransfer('twoStep')), withT({ transferKind: 'direct' }))).toEqual([
      'transfer_kind_mismatch',
    ]);
  });

  it('wrong nonce, expiry, receiver and description of a preapproval send', () => {
    const send: Intent = {
      kind: 'preapproval-send',
      sender: ALICE,
      receiver: BOB,
      amount: '3.5',
      nonce: 4,
      expiresAt: isoMicros(SEND_EXPIRES),
      description: 'rent',
    };
    const tx = decoded(buildPreapprovalSend());
    expect(reasons(tx, { ...send, nonce: 5 })).toEqual(['nonce_mismatch']);
    expect(reasons(tx, { ...send, expiresAt: isoMicros(SEND_EXPIRES - 1n) })).toEqual(['deadline_mismatch']);
    expect(reasons(tx, { ...send, receiver: CAROL })).toEqual(['party_mismatch']);
    expect(reasons(tx, { ...send, description: 'food' })).toEqual(['memo_mismatch']);
    expect(reasons(decoded(tamper(net, buildPreapprovalSend(), 'amount')), send)).toEqual([
      'amount_mismatch',
    ]);
  });

  it('wrong contract id (instruction, proposal, generic exercise)', () => {
    const other = existing('another instruction');
    const r = checkIntent(decoded(buildAccept()), {
      kind: 'transfer-instruction-accept',
      party: BOB,
      instructionCid: other,
    });
    expect(r.problems).toEqual([
      {
        reason: 'contract_mismatch',
        message: `the transaction acts on transfer instruction ${INSTRUCTION_CID} but the intent says ${other}.`,
        where: 'node 0: contract',
      },
    ]);
    expect(
      reasons(decoded(buildSetupAccept()), {
        kind: 'setup-proposal-accept',
        party: ALICE,
        proposalCid: other,
      }),
    ).toEqual(['contract_mismatch']);
    const cosign = realVector('v2_bitgo_cosigndelegationacceptprepareresponse.json');
    const intent = intentForVector(cosign) as Intent & { kind: 'exercise' };
    expect(reasons(cosign, { ...intent, contractId: other })).toEqual(['contract_mismatch']);
    expect(reasons(cosign, { ...intent, choice: 'CosigningDelegationProposal_Reject' })).toEqual([
      'kind_mismatch',
    ]);
    expect(
      reasons(cosign, { ...intent, template: 'other-pkg:TW.Operator.V1.Cosign:CosigningDelegationProposal' }),
    ).toEqual(['kind_mismatch']);
    expect(
      reasons(cosign, { ...intent, template: 'TW.Operator.V1.Cosign:CosigningDelegationProposal' }),
    ).toEqual([]);
  });

  it('the wrong party for an instruction: only the receiver accepts, only the sender withdraws', () => {
    // Signed for ALICE (the sender) but an accept: the root acts as BOB, and ALICE is not the receiver.
    const accept = decoded(buildAccept());
    expect(
      reasons(accept, { kind: 'transfer-instruction-accept', party: ALICE, instructionCid: INSTRUCTION_CID }),
    ).toEqual(['act_as_mismatch', 'party_mismatch', 'party_mismatch', 'unexplained_create']);
  });

  it('act_as other than exactly the signing party', () => {
    const p = direct();
    const both = {
      ...p,
      metadata: { ...p.metadata, submitterInfo: { ...p.metadata.submitterInfo, actAs: [ALICE, BOB].sort() } },
    };
    const r = checkIntent(decoded(both), TRANSFER);
    expect(r.problems.map((x) => x.reason)).toEqual(['act_as_mismatch']);
    expect(r.problems[0]!.message).toContain(BOB);
    const other = {
      ...p,
      metadata: { ...p.metadata, submitterInfo: { ...p.metadata.submitterInfo, actAs: [CAROL] } },
    };
    expect(reasons(decoded(other), TRANSFER)).toEqual(['act_as_mismatch']);
  });

  it('an extra root node is refused and named', () => {
    const tampered = decoded(tamper(net, direct(), 'extraRoot'));
    const extra = tampered.transaction.roots[1]!;
    const r = checkIntent(tampered, TRANSFER);
    const rc = r.problems.filter((p) => p.reason === 'root_count');
    expect(rc).toHaveLength(1);
    expect(rc[0]!.where).toBe(`node ${extra}`);
    expect(rc[0]!.message).toContain(
      `node ${extra} is an extra root action (a create of splice-amulet:Splice.Amulet:Amulet)`,
    );
    // The extra amulet is for mallory: also an unexplained holding.
    expect(r.problems.map((p) => p.reason)).toContain('unexplained_create');
    expect(r.actions).toHaveLength(2);
  });

  it('the wrong kind of action', () => {
    expect(
      reasons(decoded(direct()), {
        kind: 'transfer-instruction-accept',
        party: ALICE,
        instructionCid: INSTRUCTION_CID,
      }),
    ).toContain('kind_mismatch');
    const cosign = realVector('v2_bitgo_cosigndelegationacceptprepareresponse.json');
    const party = cosign.metadata.submitterInfo.actAs[0]!;
    // Its CosigningDelegation is also nothing a transfer creates for the party.
    expect(reasons(cosign, { ...TRANSFER, sender: party } as Intent)).toEqual([
      'unrecognised_action',
      'unexplained_create',
    ]);
    // A recognised transfer cannot be signed under a generic exercise intent.
    const root = decoded(direct()).nodeById.get('0') as NodeBody & { type: 'exercise' };
    expect(
      reasons(decoded(direct()), {
        kind: 'exercise',
        party: ALICE,
        template: templateName(root.packageName, root.templateId),
        choice: root.choiceId,
        contractId: root.contractId,
      }),
    ).toContain('kind_mismatch');
    // Nor one of a package this signer does not recognise: a generic intent would leave its
    // receiver, amount and inputs to the participant.
    const foreign = decoded(direct());
    const froot = foreign.nodeById.get('0') as NodeBody & { type: 'exercise' };
    froot.packageName = 'some-other-registry';
    const generic = {
      kind: 'exercise',
      party: ALICE,
      template: templateName(froot.packageName, froot.templateId),
      choice: froot.choiceId,
      contractId: froot.contractId,
    } as Intent;
    const problems = checkIntent(foreign, generic).problems;
    expect(problems.map((p) => p.message).join(' ')).toMatch(/moves value/);
  });

  const rulesRef = {
    contractId: existing('rules'),
    packageName: PACKAGE_NAME.amulet,
    templateId: ID.amuletRules,
    signatories: [DSO],
    stakeholders: [DSO],
  };

  it('an unexplained exercise acting for the party, grafted into the subtree', () => {
    const steal = exerciseNode(rulesRef, {
      actingParties: [ALICE],
      choiceId: 'AmuletRules_DevNet_Tap',
      chosenValue: record(undefined, []),
      consuming: false,
      children: [],
      exerciseResult: unit,
    });
    const p = graft(direct(), '0', steal);
    const r = checkIntent(decoded(p), TRANSFER);
    const id = String(p.transaction.nodes.length - 1);
    expect(r.problems).toEqual([
      {
        reason: 'unexplained_exercise',
        message: `node ${id} exercises AmuletRules_DevNet_Tap on splice-amulet:Splice.AmuletRules:AmuletRules acting for ${ALICE}, which a transfer does not explain.`,
        where: `node ${id}`,
      },
    ]);
    // The same exercise acting only for someone else is not the party's business.
    const theirs = graft(direct(), '0', { ...steal, actingParties: [DSO] });
    expect(reasons(decoded(theirs), TRANSFER)).toEqual([]);
  });

  it('an unexplained archive of a holding not among the declared inputs', () => {
    const victim = {
      contractId: existing('savings'),
      packageName: PACKAGE_NAME.amulet,
      templateId: ID.amulet,
      signatories: [ALICE, DSO],
      stakeholders: [ALICE, DSO],
    };
    const p = graft(direct(), '0', archiveNode(victim, [ALICE, DSO]));
    const r = checkIntent(decoded(p), TRANSFER);
    expect(r.problems.map((x) => x.reason)).toEqual(['unexplained_archive']);
    expect(r.problems[0]!.message).toContain(existing('savings'));
    // Archiving a declared input is what a transfer does.
    const ok = graft(direct(), '0', archiveNode({ ...victim, contractId: existing('h0') }, [ALICE, DSO]));
    expect(reasons(decoded(ok), TRANSFER)).toEqual([]);
    // An accept may not archive the receiver's own holdings either.
    const acc = graft(
      buildAccept(),
      '0',
      archiveNode({ ...victim, signatories: [BOB, DSO], stakeholders: [BOB, DSO] }, [BOB, DSO]),
    );
    expect(
      reasons(decoded(acc), {
        kind: 'transfer-instruction-accept',
        party: BOB,
        instructionCid: INSTRUCTION_CID,
      }),
    ).toEqual(['unexplained_archive']);
  });

  it('a generic exercise may not hide a value-moving exercise for the party', () => {
    const cosign = realVector('v2_bitgo_cosigndelegationacceptprepareresponse.json');
    const intent = intentForVector(cosign);
    const party = cosign.metadata.submitterInfo.actAs[0]!;
    const send = exerciseNode(
      {
        contractId: PREAPPROVAL_CID,
        packageName: PACKAGE_NAME.amulet,
        templateId: ID.transferPreapproval,
        signatories: [DSO],
        stakeholders: [DSO],
      },
      {
        actingParties: [party],
        choiceId: 'TransferPreapproval_Send',
        chosenValue: record(undefined, []),
        consuming: false,
        children: [],
      },
    );
    const model: PreparedTransaction = { transaction: cosign.transaction, metadata: cosign.metadata };
    const grafted = decoded(graft(model, cosign.transaction.roots[0]!, send));
    expect(reasons(grafted, intent)).toEqual(['unexplained_exercise']);
    // Any other consequence of the root is its own business.
    const benign = decoded(
      graft(model, cosign.transaction.roots[0]!, { ...send, choiceId: 'TransferPreapproval_Renew' }),
    );
    expect(reasons(benign, intent)).toEqual([]);
  });

  it('a generic create must be of the named template and signed by the party', () => {
    const ping = realVector('v2_canton_network_wallet_sdk_utils_ping.json');
    const intent = intentForVector(ping) as Intent & { kind: 'create' };
    expect(reasons(ping, { ...intent, template: `#${intent.template.replace(/:Ping$/, ':Pong')}` })).toEqual([
      'kind_mismatch',
    ]);
    expect(reasons(ping, { ...intent, party: CAROL })).toEqual(['act_as_mismatch', 'party_mismatch']);
  });

  it('reports every problem at once', () => {
    const tampered = decoded(tamper(net, direct(), 'receiver'));
    const rs = reasons(tampered, withT({ amount: '1', memo: 'x', transferKind: 'offer' }));
    for (const want of [
      'party_mismatch',
      'amount_mismatch',
      'memo_mismatch',
      'transfer_kind_mismatch',
      'unexplained_create',
    ])
      expect(rs).toContain(want);
  });
});

describe('checkIntent: amounts are compared as decimals', () => {
  const amountArb = fc
    .tuple(fc.bigInt({ min: 0n, max: 10n ** 12n }), fc.bigInt({ min: 1n, max: 10n ** 10n - 1n }))
    .map(([whole, frac]) => `${whole}.${frac.toString().padStart(10, '0')}`);

  it('amounts differing in the last decimal are always refused', () => {
    fc.assert(
      fc.property(amountArb, fc.boolean(), (amount, up) => {
        const tx = decoded(buildTransfer('twoStep', { amount, inputs: [`${10n ** 13n}`] }));
        const units = BigInt(amount.replace('.', '')) + (up ? 1n : -1n);
        const s = units.toString().padStart(11, '0');
        const other = `${s.slice(0, -10)}.${s.slice(-10)}`;
        const rs = reasons(tx, withT({ amount: other, inputs: undefined }));
        expect(rs).toEqual(['amount_mismatch']);
      }),
      { numRuns: 40 },
    );
  });

  it('equal amounts written differently always pass', () => {
    fc.assert(
      fc.property(amountArb, fc.nat({ max: 10 }), (amount, keep) => {
        const tx = decoded(buildTransfer('direct', { amount, inputs: [`${10n ** 13n}`] }));
        // Strip trailing zeros, then pad back to `keep` decimals where that loses nothing.
        const [w, f] = amount.split('.') as [string, string];
        const sig = f.replace(/0+$/, '');
        const frac = sig.padEnd(Math.max(sig.length, keep), '0');
        const written = `${BigInt(w)}${frac ? `.${frac}` : ''}`;
        expect(reasons(tx, withT({ amount: written, inputs: undefined }))).toEqual([]);
      }),
      { numRuns: 40 },
    );
  });
});

describe('instants and decimals', () => {
  it('parses ISO instants exactly, with offsets, and refuses what has no exact microsecond', () => {
    expect(parseInstantMicros('1970-01-01T00:00:00Z')).toBe(0n);
    expect(parseInstantMicros('1970-01-01T01:00:00.000001+01:00')).toBe(1n);
    // Year 50, not 1950.
    expect(parseInstantMicros('0050-01-01T00:00:00Z')! < parseInstantMicros('1000-01-01T00:00:00Z')!).toBe(
      true,
    );
    expect(parseInstantMicros('2026-02-30T00:00:00Z')).toBeUndefined();
    expect(parseInstantMicros('2026-02-03T00:00:00.0000001Z')).toBeUndefined();
    expect(parseInstantMicros('2026-02-03T00:00:00')).toBeUndefined();
    expect(sameInstant(isoMicros(EXECUTE_BEFORE), isoMicros(EXECUTE_BEFORE))).toBe(true);
    expect(parseInstantMicros(isoMicros(EXECUTE_BEFORE))).toBe(EXECUTE_BEFORE);
  });

  it('adds and compares decimals exactly', () => {
    expect(addDecimals(['0.1', '0.2'])).toBe('0.3');
    expect(addDecimals(['999999999999999999.9999999999', '0.0000000001'])).toBe(
      '1000000000000000000.0000000000',
    );
    expect(addDecimals([])).toBe('0');
    expect(decimalEquals('12.5', '12.5000000000')).toBe(true);
    expect(decimalEquals('12.5', '12.5000000001')).toBe(false);
    expect(compareDecimals('1e3', '1000')).toBeUndefined();
    expect(compareDecimals('-1.5', '1')).toBe(-1);
  });
});

// ---- the security review's holes: each test failed before its fix -----------------------------------------

const transferOf = (i: Intent) => i as Intent & { kind: 'transfer' };
const SEND: Intent = {
  kind: 'preapproval-send',
  sender: ALICE,
  receiver: BOB,
  amount: '3.5',
  nonce: 4,
  expiresAt: isoMicros(SEND_EXPIRES),
  description: 'rent',
};
const isExercise = (n: NodeBody): n is NodeBody & { type: 'exercise' } => n.type === 'exercise';
/** A copy of a create under a fresh contract id, its argument (and stakeholders) changed by `f`. */
const copyCreate = (n: NodeBody & { type: 'create' }, label: string, f: (v: Value) => Value = (v) => v) => ({
  ...n,
  contractId: existing(label),
  argument: f(n.argument),
});
const rootExercise = (p: PreparedTransaction, f: (n: NodeBody & { type: 'exercise' }) => NodeBody) =>
  editNode(p, p.transaction.roots[0]!, (n) => (n.type === 'exercise' ? f(n) : n));

describe('hole 1: creates that are not holdings are checked', () => {
  it('the review demo: a second lock and a second instruction to mallory under a real offer', () => {
    const tx = realVector('v2_bitgo_trasferprepareresponse.json');
    const intent = transferOf(intentForVector(tx));
    const p = modelOf(tx);
    const locked = findNode(p, createOf('LockedAmulet'));
    const instr = findNode(p, createOf('AmuletTransferInstruction'));
    const lock2 = graft(p, '0', copyCreate(locked.node, 'second lock'));
    const toMallory = graft(p, '0', {
      ...copyCreate(instr.node, 'second instruction', (v) => swapParty(v, intent.receiver, MALLORY)),
      stakeholders: [...instr.node.stakeholders.filter((s) => s !== intent.receiver), MALLORY].sort(),
    });
    const both = graft(lock2, '0', toMallory.transaction.nodes.at(-1)!.node);
    const r = checkIntent(decoded(both), intent);
    expect(r.problems.map((x) => x.reason).sort()).toEqual(['amount_mismatch', 'unexplained_create']);
    expect(r.problems.find((x) => x.reason === 'amount_mismatch')!.message).toBe(
      `the offer locks 30.0000000000 of ${intent.sender}'s holdings but the intent says ${intent.amount}.`,
    );
    expect(r.problems.find((x) => x.reason === 'unexplained_create')!.message).toMatch(
      /^the offer creates 2 transfer instructions \(nodes 14, \d+\); it must create exactly one\.$/,
    );
    expect(reasons(decoded(lock2), intent)).toEqual(['amount_mismatch']);
    expect(reasons(decoded(toMallory), intent)).toEqual(['unexplained_create']);
  });

  it('the one instruction of an offer must be the intent transfer', () => {
    const p = buildTransfer('twoStep');
    const instr = findNode(p, createOf('AmuletTransferInstruction'));
    const redirected = editNode(p, instr.nodeId, (n) =>
      n.type === 'create' ? { ...n, argument: swapParty(n.argument, BOB, MALLORY) } : n,
    );
    const r = checkIntent(decoded(redirected), TRANSFER);
    expect(r.problems).toEqual([
      {
        reason: 'party_mismatch',
        message: `the transfer instruction at node ${instr.nodeId} names ${MALLORY} as transfer.receiver but the intent says ${BOB}.`,
        where: `node ${instr.nodeId}: transfer.receiver`,
      },
    ]);
  });

  it('a create of a template the action does not explain, where the party is a stakeholder', () => {
    const command = findNode(buildPreapprovalSend(), createOf('TransferCommand')).node;
    const r = checkIntent(decoded(graft(direct(), '0', command)), TRANSFER);
    expect(r.problems.map((x) => x.reason)).toEqual(['unexplained_create']);
    expect(r.problems[0]!.message).toContain(
      'creates a splice-amulet:Splice.ExternalPartyAmuletRules:TransferCommand that',
    );
  });

  it('a preapproval send creates exactly one TransferCommand of the intent, with its delegate', () => {
    const p = buildPreapprovalSend();
    const command = findNode(p, createOf('TransferCommand'));
    const second = graft(
      p,
      '0',
      copyCreate(command.node, 'second command', (v) => swapParty(v, BOB, MALLORY)),
    );
    expect(reasons(decoded(second), SEND)).toEqual(['unexplained_create']);
    const more = editNode(p, command.nodeId, (n) =>
      n.type === 'create' ? { ...n, argument: setField(n.argument, 'amount', num('35')) } : n,
    );
    expect(reasons(decoded(more), SEND)).toEqual(['amount_mismatch']);
    expect(reasons(decoded(p), { ...SEND, delegate: VALIDATOR } as Intent)).toEqual([]);
    expect(reasons(decoded(p), { ...SEND, delegate: CAROL } as Intent)).toEqual(['party_mismatch']);
  });

  it('a setup acceptance creates one TransferPreapproval and one ValidatorRight for the proposal validator', () => {
    const intent: Intent = { kind: 'setup-proposal-accept', party: ALICE, proposalCid: SETUP_CID };
    const p = buildSetupAccept();
    const right = findNode(p, createOf('ValidatorRight'));
    expect(reasons(decoded(graft(p, '0', copyCreate(right.node, 'second right'))), intent)).toEqual([
      'unexplained_create',
    ]);
    const other = editNode(p, right.nodeId, (n) =>
      n.type === 'create' ? { ...n, argument: swapParty(n.argument, VALIDATOR, MALLORY) } : n,
    );
    expect(reasons(decoded(other), intent)).toEqual(['party_mismatch']);
  });

  it('a direct transfer counts only holdings of the intent instrument for the receiver', () => {
    const p = direct();
    const credit = p.transaction.nodes.find(
      (n) => n.node.type === 'create' && (valueToJson(n.node.argument) as J).owner === BOB,
    )!;
    const otherCoin = editNode(p, credit.nodeId, (n) =>
      n.type === 'create' ? { ...n, argument: swapParty(n.argument, DSO, CAROL) } : n,
    );
    expect(reasons(decoded(otherCoin), TRANSFER)).toEqual(['instrument_mismatch', 'amount_mismatch']);
  });
});

describe('hole 2: an allocation intent pins where the value goes', () => {
  const tx = realVector('v2_bitgo_cantonallocationallocateprepareresponse.json');
  const intent = intentForVector(tx) as Intent & { kind: 'allocation-allocate' };

  it('receiver, executor, settlement reference and leg id are required and compared', () => {
    const { receiver: _, ...noReceiver } = intent;
    expect(IntentSchema.safeParse(noReceiver).success).toBe(false);
    expect(reasons(tx, { ...intent, receiver: CAROL })).toEqual(['party_mismatch']);
    expect(reasons(tx, { ...intent, executor: CAROL })).toEqual(['party_mismatch']);
    expect(reasons(tx, { ...intent, settlementRef: { ...intent.settlementRef, id: 'OTHER' } })).toEqual([
      'contract_mismatch',
    ]);
    expect(reasons(tx, { ...intent, settlementRef: { id: intent.settlementRef.id } })).toEqual([
      'contract_mismatch',
    ]);
    expect(reasons(tx, { ...intent, transferLegId: 'other-leg' })).toEqual(['contract_mismatch']);
    expect(reasons(tx, { ...intent, amount: '6' })).toContain('amount_mismatch');
  });

  it('the allocation created must be the one requested, and lock exactly the amount', () => {
    const p = modelOf(tx);
    const alloc = findNode(p, createOf('DvpLegAllocation'));
    const receiver = intent.receiver;
    const redirected = editNode(p, alloc.nodeId, (n) =>
      n.type === 'create' ? { ...n, argument: swapParty(n.argument, receiver, MALLORY) } : n,
    );
    const r = checkIntent(decoded(redirected), intent);
    expect(r.problems.map((x) => x.reason)).toEqual(['party_mismatch']);
    expect(r.problems[0]!.where).toBe(`node ${alloc.nodeId}: allocation.transferLeg.receiver`);
    expect(reasons(decoded(graft(p, '0', copyCreate(alloc.node, 'second allocation'))), intent)).toEqual([
      'unexplained_create',
    ]);
  });

  it('allocation withdraw / cancel intents must name the contract; holdings go back to the party only', () => {
    expect(IntentSchema.safeParse({ kind: 'allocation-withdraw', party: ALICE }).success).toBe(false);
    const w = realVector('v2_bitgo_cantonallocationwithdrawprepareresponse.json');
    const wi = intentForVector(w);
    const p = modelOf(w);
    const back = findNode(p, createOf('Holding'));
    const party = w.metadata.submitterInfo.actAs[0]!;
    const stolen = editNode(p, back.nodeId, (n) =>
      n.type === 'create' ? { ...n, argument: swapParty(n.argument, party, MALLORY) } : n,
    );
    expect(reasons(decoded(stolen), wi)).toContain('unexplained_create');
  });
});

describe('hole 3: templates are pinned by package name', () => {
  it('a known choice on a template of another package is not recognised', () => {
    const evil = rootExercise(direct(), (n) => ({ ...n, packageName: 'evil-amulet' }));
    expect(reasons(decoded(evil), TRANSFER)).toContain('unrecognised_action');
    const send = rootExercise(buildPreapprovalSend(), (n) => ({
      ...n,
      templateId: { ...n.templateId, entityName: 'AmuletRules', moduleName: 'Splice.AmuletRules' },
    }));
    expect(reasons(decoded(send), SEND)).toContain('unrecognised_action');
  });

  it('an allowed choice on a look-alike template of another package is unexplained', () => {
    const rules = findNode(direct(), (n): n is NodeBody & { type: 'exercise' } => {
      return isExercise(n) && n.choiceId === 'AmuletRules_Transfer';
    });
    const p = graft(direct(), '0', { ...rules.node, packageName: 'evil-amulet', children: [] });
    expect(reasons(decoded(p), TRANSFER)).toEqual(['unexplained_exercise']);
  });

  it("the factory's expectedAdmin must be the instrument admin", () => {
    const p = rootExercise(direct(), (n) => ({
      ...n,
      chosenValue: setField(n.chosenValue, 'expectedAdmin', { kind: 'party', value: CAROL }),
    }));
    const r = checkIntent(decoded(p), TRANSFER);
    expect(r.problems).toEqual([
      {
        reason: 'instrument_mismatch',
        message: `the factory is called with expectedAdmin ${CAROL} but the instrument's admin is ${DSO}.`,
        where: 'node 0: expectedAdmin',
      },
    ]);
  });
});

describe('hole 4: unreadable owners, and the instrument of inputs', () => {
  it('a holding whose owner cannot be read is refused', () => {
    const credit = direct().transaction.nodes.find(
      (n) => n.node.type === 'create' && (valueToJson(n.node.argument) as J).owner === BOB,
    )!.node as NodeBody & { type: 'create' };
    const arg = credit.argument as Value & { kind: 'record' };
    const ownerless = { ...arg, fields: arg.fields.filter((f) => f.label !== 'owner') };
    const p = graft(direct(), '0', { ...credit, contractId: existing('ownerless'), argument: ownerless });
    const r = checkIntent(decoded(p), TRANSFER);
    expect(r.problems.map((x) => x.reason)).toEqual(['unexplained_create']);
    expect(r.problems[0]!.message).toContain('whose owner cannot be read');
  });

  it('without declared inputs, the inputs consumed must be of the intent instrument', () => {
    const { inputs: _, ...noInputs } = transferOf(TRANSFER);
    const p = direct();
    const inputContracts = p.metadata.inputContracts.map((ic) =>
      ic.contract.contractId === existing('h0')
        ? { ...ic, contract: { ...ic.contract, argument: swapParty(ic.contract.argument, DSO, CAROL) } }
        : ic,
    );
    const other = { ...p, metadata: { ...p.metadata, inputContracts } };
    const r = checkIntent(decoded(other), noInputs);
    expect(r.problems).toEqual([
      {
        reason: 'instrument_mismatch',
        message: `input ${existing('h0')} is a holding of Amulet (admin ${CAROL}) but the intent says Amulet (admin ${DSO}).`,
        where: 'node 0: inputs',
      },
    ]);
    expect(reasons(decoded(p), noInputs)).toEqual([]);
  });
});

describe('hole 5: who may receive holdings, per kind', () => {
  const unlocked = (p: PreparedTransaction) => findNode(p, createOf('Amulet')).node;
  const toBob = (p: PreparedTransaction) =>
    graft(
      p,
      '0',
      copyCreate(unlocked(p), 'to bob', (v) => swapParty(v, ALICE, BOB)),
    );

  it('a withdraw or reject returns holdings to the sender only', () => {
    const withdraw: Intent = {
      kind: 'transfer-instruction-withdraw',
      party: ALICE,
      instructionCid: INSTRUCTION_CID,
    };
    const reject: Intent = {
      kind: 'transfer-instruction-reject',
      party: BOB,
      instructionCid: INSTRUCTION_CID,
    };
    expect(reasons(decoded(toBob(buildWithdraw())), withdraw)).toEqual(['unexplained_create']);
    expect(reasons(decoded(toBob(buildReject())), reject)).toEqual(['unexplained_create']);
  });

  it('an accept may return change to the sender only when the receiver gets the whole amount', () => {
    const accept: Intent = {
      kind: 'transfer-instruction-accept',
      party: BOB,
      instructionCid: INSTRUCTION_CID,
    };
    const p = buildAccept();
    const change = graft(
      p,
      '5',
      copyCreate(unlocked(p), 'change', (v) =>
        mapValue(v, (x) => (x.kind === 'numeric' && x.value === '12.5000000000' ? num('0.5') : undefined)),
      ),
    );
    expect(reasons(decoded(change), accept)).toEqual([]);
    const credit = findNode(
      change,
      (n): n is NodeBody & { type: 'create' } =>
        n.type === 'create' && (valueToJson(n.argument) as J).owner === BOB,
    );
    const short = editNode(change, credit.nodeId, (n) =>
      n.type === 'create'
        ? {
            ...n,
            argument: mapValue(n.argument, (x) =>
              x.kind === 'numeric' && x.value === '12.5000000000' ? num('12') : undefined,
            ),
          }
        : n,
    );
    const r = checkIntent(decoded(short), accept);
    expect(r.problems.map((x) => x.reason)).toEqual(['unexplained_create']);
    expect(r.problems[0]!.message).toContain('which is not change: the receiver is credited 12.0000000000');
  });
});

describe('hole 6: DSO consistency, the proposal DSO, and text the intent does not state', () => {
  it("a preapproval send's expectedDso must be the rules' DSO and the command's", () => {
    const p = rootExercise(buildPreapprovalSend(), (n) => ({
      ...n,
      chosenValue: swapParty(n.chosenValue, DSO, CAROL),
    }));
    const r = checkIntent(decoded(p), SEND);
    expect(r.problems.map((x) => x.reason)).toEqual(['party_mismatch', 'party_mismatch']);
    expect(r.problems[0]!.message).toBe(
      `the ExternalPartyAmuletRules exercised belongs to ${DSO} but the send expects the DSO ${CAROL}.`,
    );
  });

  it("a preapproval proposal's expectedDso is compared when the intent gives it", () => {
    const intent = { kind: 'preapproval-proposal', receiver: BOB, provider: VALIDATOR } as const;
    expect(reasons(decoded(buildProposal()), { ...intent, expectedDso: DSO })).toEqual([]);
    expect(reasons(decoded(buildProposal()), { ...intent, expectedDso: CAROL })).toEqual(['party_mismatch']);
  });

  it('other metadata entries on a transfer are refused unless empty', () => {
    const extra = (value: string) =>
      rootExercise(direct(), (n) => ({
        ...n,
        chosenValue: mapValue(n.chosenValue, (x) =>
          x.kind === 'textMap' && x.entries.some((e) => e.key === REASON)
            ? { kind: 'textMap', entries: [{ key: 'a.example/note', value: text(value) }, ...x.entries] }
            : undefined,
        ),
      }));
    const r = checkIntent(decoded(extra('pay mallory')), TRANSFER);
    expect(r.problems).toEqual([
      {
        reason: 'memo_mismatch',
        message:
          'the transfer carries the metadata entry "a.example/note" ("pay mallory"), which the intent does not ask for.',
        where: 'node 0: transfer.meta.values',
      },
    ]);
    expect(reasons(decoded(extra('')), TRANSFER)).toEqual([]);
  });

  describe('metadata text in token-standard choices other than transfers is refused as for transfers', () => {
    /** `v` with the entry `key` → `value` added to the `meta.values` map at the record path `path`. */
    const withMeta = (v: Value, path: readonly string[], key: string, value: string): Value => {
      if (path.length === 0) {
        if (v.kind !== 'textMap') throw new Error('not a text map');
        // Canonical: keys in ascending UTF-8 order.
        const entries = [...v.entries, { key, value: text(value) }];
        entries.sort((x, y) => Buffer.compare(Buffer.from(x.key), Buffer.from(y.key)));
        return { kind: 'textMap', entries };
      }
      if (v.kind !== 'record') throw new Error(`no record at ${path.join('.')}`);
      const [head, ...rest] = path;
      if (!v.fields.some((f) => f.label === head)) throw new Error(`no field ${head}`);
      return {
        ...v,
        fields: v.fields.map((f) =>
          f.label === head ? { label: f.label, value: withMeta(f.value, rest, key, value) } : f,
        ),
      };
    };
    const addMeta = (p: PreparedTransaction, path: string, key: string, value: string) =>
      decoded(
        rootExercise(p, (n) => ({ ...n, chosenValue: withMeta(n.chosenValue, path.split('.'), key, value) })),
      );

    const allocation = realVector('v2_bitgo_cantonallocationallocateprepareresponse.json');
    const allocate = intentForVector(allocation) as Intent & { kind: 'allocation-allocate' };

    it('allocate: an entry the intent does not state, in the leg, the settlement or extraArgs (the reason too) → memo_mismatch', () => {
      expect(allocate.meta).toEqual({
        'com.bitgo/trade-ref': 'CASH-27BDEF64',
        [REASON]: 'CashDvp allocation',
      });
      expect(reasons(allocation, allocate)).toEqual([]);
      const p = modelOf(allocation);
      for (const [path, key] of [
        ['allocation.transferLeg.meta.values', 'a.example/note'],
        ['allocation.transferLeg.meta.values', REASON],
        ['allocation.settlement.meta.values', 'a.example/note'],
        ['extraArgs.meta.values', 'a.example/note'],
        ['extraArgs.meta.values', REASON],
      ] as const) {
        const tx = addMeta(p, path, key, 'pay mallory');
        const r = checkIntent(tx, IntentSchema.parse(allocate));
        expect(r.problems, `${path} ${key}`).toEqual([
          {
            reason: 'memo_mismatch',
            message:
              key === REASON && path !== 'extraArgs.meta.values'
                ? `the allocation requested carries the metadata entry "${key}" ("pay mallory"), but the intent says "CashDvp allocation".`
                : `the allocation requested carries the metadata entry "${key}" ("pay mallory"), which the intent does not ask for.`,
            where: `node ${allocation.transaction.roots[0]}: ${path}`,
          },
        ]);
        // An empty value is no text.
        expect(
          reasons(addMeta(p, path, key === REASON ? 'a.example/empty' : key, ''), allocate),
          path,
        ).toEqual([]);
      }
      // Without the venue's metadata in the intent, its text is refused too: the trade reference and the reason.
      const { meta: _, ...bare } = allocate;
      expect(reasons(allocation, bare)).toEqual(['memo_mismatch', 'memo_mismatch']);
      expect(reasons(allocation, { ...allocate, meta: { ...allocate.meta, [REASON]: 'other' } })).toEqual([
        'memo_mismatch',
      ]);
    });

    it('transfer instruction accept / reject / withdraw: an extraArgs.meta entry (the reason too) → memo_mismatch', () => {
      const cases = [
        [buildAccept(), 'transfer-instruction-accept', BOB, 'TransferInstruction_Accept'],
        [buildReject(), 'transfer-instruction-reject', BOB, 'TransferInstruction_Reject'],
        [buildWithdraw(), 'transfer-instruction-withdraw', ALICE, 'TransferInstruction_Withdraw'],
      ] as const;
      for (const [p, kind, party, choice] of cases) {
        const intent = { kind, party, instructionCid: INSTRUCTION_CID } as const;
        expect(reasons(decoded(p), intent), kind).toEqual([]);
        for (const key of ['a.example/note', REASON]) {
          const r = checkIntent(
            addMeta(p, 'extraArgs.meta.values', key, 'pay mallory'),
            IntentSchema.parse(intent),
          );
          expect(r.problems, `${kind} ${key}`).toEqual([
            {
              reason: 'memo_mismatch',
              message: `the ${choice} carries the metadata entry "${key}" ("pay mallory"), which the intent does not ask for.`,
              where: `node ${p.transaction.roots[0]}: extraArgs.meta.values`,
            },
          ]);
        }
        expect(reasons(addMeta(p, 'extraArgs.meta.values', 'a.example/note', ''), intent), kind).toEqual([]);
      }
    });

    it('allocation withdraw / request reject: extraArgs.meta text only as the intent states it', () => {
      const reject = realVector('v2_bitgo_cantonallocationrejectprepareresponse.json');
      const intent = intentForVector(reject) as Intent & { kind: 'allocation-request-reject' };
      expect(intent.meta, 'the vector carries a reason').toBeDefined();
      expect(reasons(reject, intent)).toEqual([]);
      const { meta: _stated, ...bare } = intent;
      expect(reasons(reject, bare)).toEqual(['memo_mismatch']);
      const [key] = Object.keys(intent.meta!);
      expect(reasons(reject, { ...intent, meta: { [key!]: 'pay mallory' } })).toEqual(['memo_mismatch']);
      const withdraw = realVector('v2_bitgo_cantonallocationwithdrawprepareresponse.json');
      const w = intentForVector(withdraw) as Intent & { kind: 'allocation-withdraw' };
      expect(reasons(withdraw, w)).toEqual([]);
      const r = checkIntent(
        addMeta(
          { transaction: withdraw.transaction, metadata: withdraw.metadata },
          'extraArgs.meta.values',
          'a.example/note',
          'pay mallory',
        ),
        IntentSchema.parse(w),
      );
      expect(r.problems.map((x) => x.reason)).toEqual(['memo_mismatch']);
    });

    it('transfer: a reason in extraArgs.meta may only repeat the memo', () => {
      const p = direct();
      expect(reasons(addMeta(p, 'extraArgs.meta.values', REASON, 'invoice 42'), TRANSFER)).toEqual([]);
      expect(reasons(addMeta(p, 'extraArgs.meta.values', REASON, 'pay mallory'), TRANSFER)).toEqual([
        'memo_mismatch',
      ]);
    });
  });
});

// ---- an untrusted validator: DSO, provider and expiry are the intent's, not the transaction's ------------

describe('validator-path pins: DSO, validator, delegate and expiry', () => {
  const SETUP: Intent = { kind: 'setup-proposal-accept', party: ALICE, proposalCid: SETUP_CID };
  const setupWhere = (tx: DecodedTransaction, intent: Intent) =>
    checkIntent(tx, IntentSchema.parse(intent)).problems.map((p) => [p.reason, p.where]);

  it('a send under another DSO than the intent names is refused once, at expectedDso', () => {
    const tx = decoded(buildPreapprovalSend());
    expect(reasons(tx, { ...SEND, dso: DSO } as Intent)).toEqual([]);
    const r = checkIntent(tx, IntentSchema.parse({ ...SEND, dso: CAROL }));
    expect(r.problems).toEqual([
      {
        reason: 'party_mismatch',
        message: `the send expects the DSO ${DSO} but the DSO is ${CAROL}.`,
        where: 'node 0: expectedDso',
      },
    ]);
    // A TransferCommand under another DSO than the intent's (and the send's) is refused too.
    const p = buildPreapprovalSend();
    const command = findNode(p, createOf('TransferCommand'));
    const moved = editNode(p, command.nodeId, (n) =>
      n.type === 'create' ? { ...n, argument: swapParty(n.argument, DSO, MALLORY) } : n,
    );
    expect(setupWhere(decoded(moved), { ...SEND, dso: DSO } as Intent)).toEqual([
      ['party_mismatch', `node ${command.nodeId}: dso`],
    ]);
  });

  it('a send whose delegate is not the pinned validator party is refused', () => {
    const tx = decoded(buildPreapprovalSend());
    expect(setupWhere(tx, { ...SEND, delegate: MALLORY } as Intent)).toEqual([
      ['party_mismatch', 'node 0: delegate'],
    ]);
  });

  it('a setup acceptance under another DSO than the intent names is refused', () => {
    const tx = decoded(buildSetupAccept());
    expect(reasons(tx, { ...SETUP, dso: DSO } as Intent)).toEqual([]);
    const r = checkIntent(tx, IntentSchema.parse({ ...SETUP, dso: CAROL }));
    expect(r.problems).toEqual([
      {
        reason: 'party_mismatch',
        message: `the setup proposal names ${DSO} as dso but the DSO is ${CAROL}.`,
        where: 'node 0: dso',
      },
    ]);
  });

  it('the TransferPreapproval and ValidatorRight must name the DSO, even without one in the intent', () => {
    const p = buildSetupAccept();
    const right = findNode(p, createOf('ValidatorRight'));
    const other = editNode(p, right.nodeId, (n) =>
      n.type === 'create' ? { ...n, argument: swapParty(n.argument, DSO, MALLORY) } : n,
    );
    expect(setupWhere(decoded(other), SETUP)).toEqual([['party_mismatch', `node ${right.nodeId}: dso`]]);
    expect(setupWhere(decoded(other), { ...SETUP, dso: DSO } as Intent)).toEqual([
      ['party_mismatch', `node ${right.nodeId}: dso`],
    ]);
  });

  it("the creates are checked against the intent's validator, not the proposal's", () => {
    // The preapproval and the right name mallory; the proposal (an input contract) still names VALIDATOR.
    const p = buildSetupAccept();
    const all = {
      ...p,
      transaction: {
        ...p.transaction,
        nodes: p.transaction.nodes.map((n) =>
          n.node.type === 'create'
            ? { ...n, node: { ...n.node, argument: swapParty(n.node.argument, VALIDATOR, MALLORY) } }
            : n,
        ),
      },
    };
    const tx = decoded(all);
    // Without an intent validator the creates follow the proposal: both refused. With one, the creates
    // follow the intent; a proposal naming another validator is refused once, by the field comparison.
    expect(reasons(tx, SETUP)).toEqual(['party_mismatch', 'party_mismatch']);
    expect(reasons(tx, { ...SETUP, validator: VALIDATOR } as Intent)).toEqual([
      'party_mismatch',
      'party_mismatch',
    ]);
    expect(reasons(tx, { ...SETUP, validator: MALLORY } as Intent)).toEqual(['party_mismatch']);
  });

  it('the preapproval must expire after the bound and no later than its end', () => {
    const tx = decoded(buildSetupAccept());
    const within = (after: bigint, notAfter: bigint) =>
      reasons(tx, {
        ...SETUP,
        expires: { after: isoMicros(after), notAfter: isoMicros(notAfter) },
      } as Intent);
    const DAY = 86_400_000_000n;
    expect(within(T0, T0 + 366n * DAY)).toEqual([]);
    expect(within(T0, SETUP_EXPIRES)).toEqual([]); // the end is included
    expect(within(SETUP_EXPIRES, SETUP_EXPIRES + DAY)).toEqual(['deadline_mismatch']); // not after: expired
    expect(within(T0 - 300n * DAY, T0 + 66n * DAY)).toEqual(['deadline_mismatch']); // too far ahead
    const r = checkIntent(
      tx,
      IntentSchema.parse({
        ...SETUP,
        expires: { after: isoMicros(SETUP_EXPIRES + DAY), notAfter: isoMicros(SETUP_EXPIRES + 2n * DAY) },
      }),
    );
    expect(r.problems[0]).toEqual({
      reason: 'deadline_mismatch',
      message: `expiresAt is ${isoMicros(SETUP_EXPIRES)} but the intent wants it after ${isoMicros(SETUP_EXPIRES + DAY)} and no later than ${isoMicros(SETUP_EXPIRES + 2n * DAY)}.`,
      where: 'node 0: expiresAt',
    });
    expect(IntentSchema.safeParse({ ...SETUP, expires: { after: 'soon', notAfter: 'later' } }).success).toBe(
      false,
    );
  });
});
