/**
 * Token-standard actions of external parties on a running sandbox, through the real clients
 * (registry via the validator's scan-proxy for factories and choice contexts, Ledger API prepare,
 * the hash recomputed and signed with the party's key, executeAndWait): DevNet tap, transfer
 * (direct with a receiver's preapproval, else an offer; to oneself a merge), an offer's
 * accept/reject/withdraw, a preapproval. For tests whose subject is what these transactions look
 * like afterwards (history readers, parsers), not how they are made.
 */
import { randomUUID, sign } from 'node:crypto';
import { expect } from 'vitest';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import type { Command, JsGetActiveContractsResponse } from '../../src/canton/ledger-api/schemas.js';
import { ValidatorClient } from '../../src/canton/validator/client.js';
import type { TransferFactoryWithChoiceContext } from '../../src/canton/validator/registry.js';
import { bytesToBase64 } from '../../src/hashing/input.js';
import { hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import { isoMicros } from '../../src/sandbox/ledger/clock.js';
import type { Contract } from '../../src/sandbox/ledger/store.js';
import { identifierString } from '../../src/sandbox/ledger/value-json.js';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import type { RunningSandbox } from '../../src/sandbox/server.js';
import type { TestParty } from './sandbox-party.js';

export const HOLDING_IFACE = '#splice-api-token-holding-v1:Splice.Api.Token.HoldingV1:Holding';
export const INSTRUCTION_IFACE =
  '#splice-api-token-transfer-instruction-v1:Splice.Api.Token.TransferInstructionV1:TransferInstruction';
const FACTORY_IFACE =
  '#splice-api-token-transfer-instruction-v1:Splice.Api.Token.TransferInstructionV1:TransferFactory';
export const REASON = 'splice.lfdecentralizedtrust.org/reason';

type Disclosed = {
  templateId: string;
  contractId: string;
  createdEventBlob: string;
  synchronizerId: string;
}[];
type RegistryDisclosed = TransferFactoryWithChoiceContext['choiceContext']['disclosedContracts'];

const forLedger = (ds: RegistryDisclosed): Disclosed =>
  ds.map(({ templateId, contractId, createdEventBlob, synchronizerId }) => ({
    templateId,
    contractId,
    createdEventBlob,
    synchronizerId,
  }));

function createdEventOf(item: JsGetActiveContractsResponse) {
  const entry = item.contractEntry;
  return entry && 'JsActiveContract' in entry ? entry.JsActiveContract.createdEvent : undefined;
}

export interface Committed {
  updateId: string;
  offset: number;
}

export function tokenKit(sb: RunningSandbox) {
  const net = sb.ctx.net;
  const ledger = new LedgerApiClient({
    baseUrl: sb.urls.ledgerApi,
    retry: { baseDelayMs: 5, maxDelayMs: 20 },
  });
  const registry = new ValidatorClient({ baseUrl: sb.urls.validator, retry: { attempts: 1 } }).registry();
  const disclose = (c: Contract): Disclosed[number] => ({
    templateId: identifierString(c.templateId),
    contractId: c.contractId,
    createdEventBlob: c.createdEventBlob,
    synchronizerId: net.synchronizerId,
  });

  /** Prepare as `p`, check the hash, sign it, execute and wait. */
  async function submit(p: TestParty, command: Command, disclosedContracts: Disclosed): Promise<Committed> {
    const prep = await ledger.prepare({
      userId: LEDGER_API_USER,
      commandId: randomUUID(),
      actAs: [p.id],
      synchronizerId: net.synchronizerId,
      commands: [command],
      disclosedContracts,
    });
    const hash = hashPreparedTransaction(prep.preparedTransaction, { scheme: 'v2' });
    expect(bytesToBase64(hash)).toBe(prep.preparedTransactionHash);
    const res = await ledger.executeAndWait({
      preparedTransaction: prep.preparedTransaction,
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
    return { updateId: res.updateId, offset: res.completionOffset };
  }

  /** `p`'s active contracts of an interface, with their views. */
  async function viewsOf(p: TestParty, iface: string) {
    const acs = await ledger.activeContracts({
      activeAtOffset: (await ledger.ledgerEnd()).offset,
      eventFormat: {
        filtersByParty: {
          [p.id]: {
            cumulative: [
              {
                identifierFilter: {
                  InterfaceFilter: { value: { interfaceId: iface, includeInterfaceView: true } },
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
      const view = ev?.interfaceViews?.[0]?.viewValue as Record<string, unknown> | undefined;
      return ev && view ? [{ cid: ev.contractId, view }] : [];
    });
  }

  /** Contract ids of `p`'s unlocked holdings. */
  async function unlocked(p: TestParty): Promise<string[]> {
    return (await viewsOf(p, HOLDING_IFACE))
      .filter((h) => h.view.owner === p.id && h.view.lock === null)
      .map((h) => h.cid);
  }

  /** Pending transfer instructions where `p` is sender or receiver. */
  async function instructions(p: TestParty): Promise<string[]> {
    return (await viewsOf(p, INSTRUCTION_IFACE)).map((i) => i.cid);
  }

  return {
    ledger,
    submit,
    unlocked,
    instructions,

    /** AmuletRules_DevNet_Tap signed by `p` (tx-kind mint). */
    tap(p: TestParty, amount: string): Promise<Committed> {
      const rules = net.amuletRules();
      const round = net.store.get(net.latestRound().contractId)!;
      return submit(
        p,
        {
          ExerciseCommand: {
            templateId: '#splice-amulet:Splice.AmuletRules:AmuletRules',
            contractId: rules.contractId,
            choice: 'AmuletRules_DevNet_Tap',
            choiceArgument: { receiver: p.id, amount, openRound: round.contractId },
          },
        },
        [disclose(rules), disclose(round)],
      );
    },

    /** `TransferFactory_Transfer` of `amount` from all of `from`'s unlocked holdings. */
    async transfer(
      from: TestParty,
      to: TestParty,
      amount: string,
      reason?: string,
    ): Promise<Committed & { transferKind: string }> {
      const now = net.clock.now();
      const args = {
        expectedAdmin: net.dso,
        transfer: {
          sender: from.id,
          receiver: to.id,
          amount,
          instrumentId: { admin: net.dso, id: 'Amulet' },
          requestedAt: isoMicros(now - 60_000_000n),
          executeBefore: isoMicros(now + 3_600_000_000n),
          inputHoldingCids: await unlocked(from),
          meta: { values: reason === undefined ? {} : { [REASON]: reason } },
        },
        extraArgs: { context: { values: {} }, meta: { values: {} } },
      };
      const factory = await registry.getTransferFactory({ choiceArguments: args, excludeDebugFields: true });
      const done = await submit(
        from,
        {
          ExerciseCommand: {
            templateId: FACTORY_IFACE,
            contractId: factory.factoryId,
            choice: 'TransferFactory_Transfer',
            choiceArgument: {
              ...args,
              extraArgs: { context: factory.choiceContext.choiceContextData, meta: { values: {} } },
            },
          },
        },
        forLedger(factory.choiceContext.disclosedContracts),
      );
      return { ...done, transferKind: factory.transferKind };
    },

    /** `TransferInstruction_<choice>` on `cid` as `p`, with the registry's choice context. */
    async answer(p: TestParty, cid: string, choice: 'accept' | 'reject' | 'withdraw'): Promise<Committed> {
      const ctx =
        choice === 'accept'
          ? await registry.getTransferInstructionAcceptContext(cid, { excludeDebugFields: true })
          : choice === 'reject'
            ? await registry.getTransferInstructionRejectContext(cid, { excludeDebugFields: true })
            : await registry.getTransferInstructionWithdrawContext(cid, { excludeDebugFields: true });
      return submit(
        p,
        {
          ExerciseCommand: {
            templateId: INSTRUCTION_IFACE,
            contractId: cid,
            choice: `TransferInstruction_${choice[0]!.toUpperCase()}${choice.slice(1)}`,
            choiceArgument: { extraArgs: { context: ctx.choiceContextData, meta: { values: {} } } },
          },
        },
        forLedger(ctx.disclosedContracts),
      );
    },

    /** A TransferPreapprovalProposal by `p` (the validator's automation accepts it). */
    preapprove(p: TestParty): Promise<Committed> {
      return submit(
        p,
        {
          CreateCommand: {
            templateId: '#splice-wallet:Splice.Wallet.TransferPreapproval:TransferPreapprovalProposal',
            createArguments: { receiver: p.id, provider: net.validatorParty, expectedDso: net.dso },
          },
        },
        [],
      );
    },
  };
}
