/**
 * The recogniser (src/intent/recognise.ts) on every real vector and every
 * sandbox builder. Expected values are read independently: from the decoded
 * node's JSON rendering (`valueToJson`) by plain property access, from the
 * builders' inputs, or as concrete values checked by hand against `inspect`.
 */
import { describe, expect, it } from 'vitest';
import type { DecodedTransaction, NodeBody } from '../../src/hashing/model.js';
import { isoMicros, valueToJson } from '../../src/hashing/render.js';
import { decimalEquals } from '../../src/intent/decimal.js';
import { inspectTransaction, renderInspectText } from '../../src/intent/inspect.js';
import type { ActionKind, RecognisedAction } from '../../src/intent/model.js';
import { recogniseActions } from '../../src/intent/recognise.js';
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
  DSO,
  decoded,
  EXECUTE_BEFORE,
  existing,
  INSTRUCTION_CID,
  LOCKED_CID,
  realFiles,
  realVector,
  SEND_EXPIRES,
  SETUP_CID,
  SETUP_EXPIRES,
  T0,
  VALIDATOR,
} from './fixtures.js';

// biome-ignore lint/suspicious/noExplicitAny: plain JSON navigation in the independent reader
type J = any;
const REASON = 'splice.lfdecentralizedtrust.org/reason';

/** The kind of each real vector's single root, checked by hand against `inspect` output. */
const KINDS: Record<string, ActionKind> = {
  'v2_bitgo_cantonallocationallocateprepareresponse.json': 'allocation-allocate',
  'v2_bitgo_cantonallocationrejectprepareresponse.json': 'allocation-request-reject',
  'v2_bitgo_cantonallocationwithdrawprepareresponse.json': 'allocation-withdraw',
  'v2_bitgo_cantoncreatecommandprepareresponse.json': 'create',
  'v2_bitgo_cantonexercisecommandprepareresponse.json': 'exercise',
  'v2_bitgo_cantontokenacceptprepareresponse.json': 'transfer-instruction-accept',
  'v2_bitgo_cantontokenpreapprovalprepareresponse.json': 'create',
  'v2_bitgo_cantontokenrejectprepareresponse.json': 'transfer-instruction-reject',
  'v2_bitgo_cantontokentransferofferwithdrawnprepareresponse.json': 'transfer-instruction-withdraw',
  'v2_bitgo_cantontokentransferprepareresponse.json': 'transfer',
  'v2_bitgo_cantontransferofferwithdrawnprepareresponse.json': 'transfer-instruction-withdraw',
  'v2_bitgo_cbtctokenacceptanceprepareresponse.json': 'transfer-instruction-accept',
  'v2_bitgo_cbtctokenrejectionprepareresponse.json': 'transfer-instruction-reject',
  'v2_bitgo_cosigndelegationacceptprepareresponse.json': 'exercise',
  'v2_bitgo_onesteppreapprovalprepareresponse.json': 'preapproval-proposal',
  'v2_bitgo_preparesubmissionresponse.json': 'transfer',
  'v2_bitgo_transferacceptanceprepareresponse.json': 'transfer-instruction-accept',
  'v2_bitgo_transferrawtxnwithmemo_preparecommandresponse_base64_json.json': 'transfer',
  'v2_bitgo_transferrejectionprepareresponse.json': 'transfer-instruction-reject',
  'v2_bitgo_trasferprepareresponse.json': 'transfer',
  'v2_bitgo_usdcxtokenacceptanceprepareresponse.json': 'transfer-instruction-accept',
  'v2_canton_network_wallet_sdk_utils_ping.json': 'create',
  'v2_canton_network_wallet_signing_bitgo_transfer_preapproval_pv35.json': 'preapproval-proposal',
  'v2_canton_network_wallet_tx_visualizer_create_ping.json': 'create',
  'v2_cordialsys_crosschain_live_create_account_accept.json': 'setup-proposal-accept',
  'v2_splice_wallet_kernel_tx_visualizer_transfer_preapproval_proposal.json': 'preapproval-proposal',
};

/** Transfer paths, checked by hand: the tree creates an instruction / runs TransferPreapproval_Send. */
const TRANSFER_KINDS: Record<string, 'direct' | 'offer'> = {
  'v2_bitgo_cantontokentransferprepareresponse.json': 'offer',
  'v2_bitgo_preparesubmissionresponse.json': 'offer',
  'v2_bitgo_transferrawtxnwithmemo_preparecommandresponse_base64_json.json': 'direct',
  'v2_bitgo_trasferprepareresponse.json': 'offer',
};

function rootOf(tx: DecodedTransaction): NodeBody {
  return tx.nodeById.get(tx.transaction.roots[0]!)!;
}

function inputJson(tx: DecodedTransaction, cid: string): J {
  const ic = tx.metadata.inputContracts.find((c) => c.contract.contractId === cid);
  return ic ? valueToJson(ic.contract.argument) : undefined;
}

/** What a token-standard Transfer record (as JSON) says, in the recogniser's vocabulary. */
function expectTransferRecord(a: RecognisedAction, t: J): void {
  expect(a.parties).toEqual({ sender: t.sender, receiver: t.receiver });
  expect(a.amounts).toEqual({ amount: t.amount });
  expect(a.instrument).toEqual({ admin: t.instrumentId.admin, id: t.instrumentId.id });
  expect(a.deadlines).toEqual({ requestedAt: t.requestedAt, executeBefore: t.executeBefore });
  expect(a.inputs).toEqual(t.inputHoldingCids);
  expect(a.memo).toBe(t.meta.values[REASON]);
}

/** The expectations for one real vector, read from the JSON of its root and input contracts. */
function expectFromJson(file: string, tx: DecodedTransaction, a: RecognisedAction): void {
  const root = rootOf(tx);
  expect(a.nodeId).toBe(tx.transaction.roots[0]);
  expect(a.contractId).toBe(root.type === 'create' || root.type === 'exercise' ? root.contractId : undefined);
  if (root.type === 'exercise') {
    expect(a.choice).toBe(root.choiceId);
    expect(a.actingParties).toEqual(root.actingParties);
  }
  const arg: J =
    root.type === 'exercise'
      ? valueToJson(root.chosenValue)
      : root.type === 'create'
        ? valueToJson(root.argument)
        : undefined;
  switch (a.kind) {
    case 'transfer':
      expectTransferRecord(a, arg.transfer);
      expect(a.transferKind).toBe(TRANSFER_KINDS[file]);
      return;
    case 'transfer-instruction-accept':
    case 'transfer-instruction-reject':
    case 'transfer-instruction-withdraw':
      expectTransferRecord(a, inputJson(tx, a.contractId!).transfer);
      return;
    case 'allocation-allocate': {
      const leg = arg.allocation.transferLeg;
      expect(a.parties).toEqual({
        sender: leg.sender,
        receiver: leg.receiver,
        executor: arg.allocation.settlement.executor,
      });
      expect(a.amounts).toEqual({ amount: leg.amount });
      expect(a.instrument).toEqual(leg.instrumentId);
      expect(a.inputs).toEqual(arg.inputHoldingCids);
      expect(a.deadlines.allocateBefore).toBe(arg.allocation.settlement.allocateBefore);
      return;
    }
    case 'allocation-withdraw': {
      const c = inputJson(tx, a.contractId!);
      expect(a.parties.sender).toBe(c.allocation.transferLeg.sender);
      expect(a.parties.receiver).toBe(c.allocation.transferLeg.receiver);
      expect(a.amounts).toEqual({ amount: c.allocation.transferLeg.amount });
      expect(a.inputs).toEqual([c.lockedHoldingCid]);
      return;
    }
    case 'allocation-request-reject':
      expect(a.parties).toEqual({ actor: arg.actor });
      return;
    case 'preapproval-proposal':
      expect(a.parties).toEqual({
        receiver: arg.receiver,
        provider: arg.provider,
        expectedDso: arg.expectedDso,
      });
      expect(a.signatories).toEqual(root.type === 'create' ? root.signatories : []);
      return;
    case 'setup-proposal-accept': {
      const p = inputJson(tx, a.contractId!);
      expect(a.parties).toEqual({ user: p.user, validator: p.validator });
      const pre = tx.transaction.nodes.flatMap(({ node }) =>
        node.type === 'create' && node.templateId.entityName === 'TransferPreapproval' ? [node] : [],
      );
      expect(pre).toHaveLength(1);
      expect(a.deadlines).toEqual({ expiresAt: (valueToJson(pre[0]!.argument) as J).expiresAt });
      return;
    }
    case 'create':
    case 'exercise':
      expect(a.parties).toEqual({});
      expect(a.amounts).toEqual({});
      return;
    default:
      throw new Error(`no expectation for ${a.kind}`);
  }
}

describe('recogniseActions on the real vectors', () => {
  it('classifies every vector file (a new vector must be added here)', () => {
    expect(realFiles).toEqual(Object.keys(KINDS).sort());
  });

  for (const file of realFiles)
    it(`${file}: ${KINDS[file]} with the fields of its argument`, () => {
      const tx = realVector(file);
      const actions = recogniseActions(tx);
      expect(actions).toHaveLength(1);
      expect(actions[0]!.kind).toBe(KINDS[file]);
      expectFromJson(file, tx, actions[0]!);
    });

  it('reads concrete values checked by hand', () => {
    const direct = recogniseActions(
      realVector('v2_bitgo_transferrawtxnwithmemo_preparecommandresponse_base64_json.json'),
    )[0]!;
    expect(direct.amounts.amount).toBe('0.1000000000');
    expect(direct.memo).toBe('11');
    expect(direct.instrument?.id).toBe('Amulet');
    expect(direct.deadlines.executeBefore).toBe('2025-12-04T06:41:58.475000Z');
    const offer = recogniseActions(realVector('v2_bitgo_trasferprepareresponse.json'))[0]!;
    expect(offer.amounts.amount).toBe('15.0000000000');
    expect(offer.inputs).toHaveLength(2);
    expect(offer.memo).toBe('');
    const withdraw = recogniseActions(
      realVector('v2_bitgo_cantontransferofferwithdrawnprepareresponse.json'),
    )[0]!;
    expect(withdraw.parties.sender?.startsWith('ravi-2-step-party::')).toBe(true);
    expect(withdraw.amounts.amount).toBe('1.0000000000');
    const cbtc = recogniseActions(realVector('v2_bitgo_cbtctokenacceptanceprepareresponse.json'))[0]!;
    expect(cbtc.instrument?.id).toBe('CBTC');
    expect(cbtc.memo).toBeUndefined();
    const setup = recogniseActions(
      realVector('v2_cordialsys_crosschain_live_create_account_accept.json'),
    )[0]!;
    expect(setup.deadlines.expiresAt).toBe('2026-06-15T11:00:46.363152Z');
  });

  it('inspect lists the same actions as `intents`, and the text report shows them', () => {
    for (const file of realFiles) {
      const tx = realVector(file);
      const r = inspectTransaction(tx, 'v3');
      expect(r.intents).toEqual(recogniseActions(tx));
    }
    const r = inspectTransaction(
      realVector('v2_bitgo_transferrawtxnwithmemo_preparecommandresponse_base64_json.json'),
    );
    const text = renderInspectText(r);
    expect(text).toContain('Recognised actions\n  [0] transfer (direct): splice-amulet:');
    expect(text).toContain('      amounts: amount 0.1000000000\n');
    expect(text).toContain('      memo: "11"\n');
  });
});

describe('recogniseActions on the sandbox builders', () => {
  const only = (tx: DecodedTransaction): RecognisedAction => {
    const as = recogniseActions(tx);
    expect(as).toHaveLength(1);
    return as[0]!;
  };

  it('direct transfer', () => {
    const a = only(decoded(buildTransfer('direct', { amount: '7.25', reason: 'invoice 42' })));
    expect(a.kind).toBe('transfer');
    expect(a.transferKind).toBe('direct');
    expect(a.parties).toEqual({ sender: ALICE, receiver: BOB });
    expect(decimalEquals(a.amounts.amount!, '7.25')).toBe(true);
    expect(a.instrument).toEqual({ admin: DSO, id: 'Amulet' });
    expect(a.memo).toBe('invoice 42');
    expect(a.deadlines).toEqual({ requestedAt: isoMicros(T0), executeBefore: isoMicros(EXECUTE_BEFORE) });
    expect(a.inputs).toEqual([existing('h0')]);
    expect(a.actingParties).toEqual([ALICE]);
    expect(a.interface).toMatch(/:Splice\.Api\.Token\.TransferInstructionV1:TransferFactory$/);
  });

  it('two-step transfer is an offer; a transfer to oneself is a self transfer', () => {
    const offer = only(decoded(buildTransfer('twoStep', { amount: '15', inputs: ['10', '10'] })));
    expect(offer.transferKind).toBe('offer');
    expect(offer.inputs).toEqual([existing('h0'), existing('h1')]);
    const self = only(decoded(buildTransfer('twoStep', { receiver: ALICE })));
    expect(self.transferKind).toBe('self');
  });

  it('instruction accept / reject / withdraw read the instruction contract', () => {
    for (const [build, kind, actor] of [
      [buildAccept, 'transfer-instruction-accept', BOB],
      [buildReject, 'transfer-instruction-reject', BOB],
      [buildWithdraw, 'transfer-instruction-withdraw', ALICE],
    ] as const) {
      const a = only(decoded(build()));
      expect(a.kind).toBe(kind);
      expect(a.contractId).toBe(INSTRUCTION_CID);
      expect(a.actingParties).toEqual([actor]);
      expect(a.parties).toEqual({ sender: ALICE, receiver: BOB });
      expect(decimalEquals(a.amounts.amount!, '12.5')).toBe(true);
      expect(a.inputs).toEqual([LOCKED_CID]);
      expect(a.instrument).toEqual({ admin: DSO, id: 'Amulet' });
    }
  });

  it('preapproval send', () => {
    const a = only(decoded(buildPreapprovalSend(4n, 'rent')));
    expect(a.kind).toBe('preapproval-send');
    expect(a.parties).toEqual({ sender: ALICE, receiver: BOB, delegate: VALIDATOR });
    expect(decimalEquals(a.amounts.amount!, '3.5')).toBe(true);
    expect(a.deadlines).toEqual({ expiresAt: isoMicros(SEND_EXPIRES) });
    expect(a.nonce).toBe('4');
    expect(a.memo).toBe('rent');
    expect(only(decoded(buildPreapprovalSend(9n, null))).memo).toBeUndefined();
  });

  it('setup proposal accept and preapproval proposal', () => {
    const s = only(decoded(buildSetupAccept()));
    expect(s.kind).toBe('setup-proposal-accept');
    expect(s.contractId).toBe(SETUP_CID);
    expect(s.parties).toEqual({ user: ALICE, validator: VALIDATOR });
    expect(s.deadlines).toEqual({ expiresAt: isoMicros(SETUP_EXPIRES) });
    const p = only(decoded(buildProposal()));
    expect(p.kind).toBe('preapproval-proposal');
    expect(p.parties).toEqual({ receiver: BOB, provider: VALIDATOR, expectedDso: DSO });
    expect(p.signatories).toEqual([BOB]);
    expect(only(decoded(buildProposal(null))).parties).toEqual({ receiver: BOB, provider: VALIDATOR });
  });
});
