/**
 * What an action may do for the signing party below its root, pinned by
 * package name and template entity (package ids differ between networks,
 * package names do not): the root templates each recognised kind may act on,
 * the exercises acting for the party it explains, and the templates it may
 * create where the party is a signatory or stakeholder. Derived from the real
 * vectors in ../shared/vectors/real and the sandbox builders (src/sandbox/prepared):
 *
 * - transfer: AmuletRules_ComputeFees and AmuletRules_Transfer (Amulet, both
 *   paths), TransferPreapproval_Send (direct), Archive of the declared input
 *   holdings (Amulet, registry Holding); creates holdings, one transfer
 *   instruction (Amulet) or TransferOffer (registry), a registry ExecutedTransfer;
 * - accept: AmuletRules_Transfer (Amulet), TransferRule_Transfer /
 *   _DirectTransfer / _TwoStepTransfer (registry), unlocking the locked
 *   holding, Archive of holdings the transaction created or the instruction
 *   locked; creates holdings and a registry ExecutedTransfer;
 * - reject / withdraw / allocation withdraw / cancel: unlocking the locked
 *   holding; creates the unlocked holding (and a registry RejectedTransfer);
 * - allocate: AllocationFactory_AllocateInternal (registry), Archive of
 *   inputs; creates holdings and one DvpLegAllocation;
 * - preapproval send: creates one TransferCommand; setup acceptance: one
 *   TransferPreapproval and one ValidatorRight; allocation request reject:
 *   the registry's RejectedDvp record; proposal: nothing;
 * - name service (Splice.Ans, Splice.Wallet.Subscriptions): an entry request
 *   exercises nothing and creates one SubscriptionRequest and one
 *   AnsEntryContext; a first payment or renewal fetches the open round
 *   (OpenMiningRound_Fetch), runs AmuletRules_ComputeFees and
 *   AmuletRules_Transfer, archives the Amulets it spends, and creates the
 *   LockedAmulet, change Amulets, the transfer's reward coupons and one
 *   SubscriptionInitialPayment / SubscriptionPayment; an expiry runs
 *   LockedAmulet_OwnerExpireLock (and the round fetch) and creates the
 *   unlocked Amulet and one SubscriptionIdleState / TerminatedSubscription.
 *
 * Consuming exercises are further limited by the check to declared inputs
 * and contracts the transaction itself created.
 */
import type { Identifier } from '../hashing/model.js';
import type { ActionKind } from './model.js';

/** Package names of the Splice and registry templates the signer knows. */
export const PKG = {
  amulet: 'splice-amulet',
  wallet: 'splice-wallet',
  registry: 'utility-registry-v0',
  registryApp: 'utility-registry-app-v0',
  registryHolding: 'utility-registry-holding-v0',
  settlementApp: 'utility-settlement-app-v1',
  nameService: 'splice-amulet-name-service',
  walletPayments: 'splice-wallet-payments',
} as const;

/** `package-name:Entity`: how the allow-lists name a node's template. */
export function templateKey(n: { packageName: string; templateId: Identifier }): string {
  return `${n.packageName}:${n.templateId.entityName}`;
}

const t = (pkg: string, entity: string) => `${pkg}:${entity}`;
const AMULET = t(PKG.amulet, 'Amulet');
const LOCKED_AMULET = t(PKG.amulet, 'LockedAmulet');
const HOLDING = t(PKG.registryHolding, 'Holding');
const EXTERNAL_RULES = t(PKG.amulet, 'ExternalPartyAmuletRules');
const REGISTRY_FACTORY = t(PKG.registryApp, 'AllocationFactory');
const INSTRUCTIONS = [t(PKG.amulet, 'AmuletTransferInstruction'), t(PKG.registryApp, 'TransferOffer')];
const ALLOCATIONS = [t(PKG.registry, 'DvpLegAllocation'), t(PKG.amulet, 'AmuletAllocation')];

/** The templates a recognised root may act on (or, for a proposal, create). */
export const ROOT_TEMPLATES: Readonly<Record<ActionKind, ReadonlySet<string> | undefined>> = {
  transfer: new Set([EXTERNAL_RULES, REGISTRY_FACTORY]),
  'transfer-instruction-accept': new Set(INSTRUCTIONS),
  'transfer-instruction-reject': new Set(INSTRUCTIONS),
  'transfer-instruction-withdraw': new Set(INSTRUCTIONS),
  'preapproval-send': new Set([EXTERNAL_RULES]),
  'setup-proposal-accept': new Set([t(PKG.amulet, 'ExternalPartySetupProposal')]),
  'preapproval-proposal': new Set([t(PKG.wallet, 'TransferPreapprovalProposal')]),
  'allocation-allocate': new Set([REGISTRY_FACTORY, EXTERNAL_RULES]),
  'allocation-withdraw': new Set(ALLOCATIONS),
  'allocation-cancel': new Set(ALLOCATIONS),
  'allocation-request-reject': new Set([t(PKG.settlementApp, 'Dvp')]),
  'allocation-request-withdraw': new Set([t(PKG.settlementApp, 'Dvp')]),
  'ans-entry-request': new Set([t(PKG.nameService, 'AnsRules')]),
  'ans-entry-pay': new Set([t(PKG.walletPayments, 'SubscriptionRequest')]),
  'ans-renewal-pay': new Set([t(PKG.walletPayments, 'SubscriptionIdleState')]),
  'ans-payment-expire': new Set([
    t(PKG.walletPayments, 'SubscriptionPayment'),
    t(PKG.walletPayments, 'SubscriptionInitialPayment'),
  ]),
  create: undefined,
  exercise: undefined,
};

const c = (template: string, choice: string) => `${template}:${choice}`;
const UNLOCK = [c(LOCKED_AMULET, 'LockedAmulet_Unlock'), c(HOLDING, 'Holding_Unlock')];
const ARCHIVE = [c(AMULET, 'Archive'), c(LOCKED_AMULET, 'Archive'), c(HOLDING, 'Archive')];
const AMULET_RULES = t(PKG.amulet, 'AmuletRules');
const TRANSFER_RULE = t(PKG.registry, 'TransferRule');
const ROUND_FETCH = c(t(PKG.amulet, 'OpenMiningRound'), 'OpenMiningRound_Fetch');
/** What locking a name-service payment runs for the payer (lockAndMakeChange in the wallet payments). */
const ANS_LOCK = [
  ROUND_FETCH,
  c(AMULET_RULES, 'AmuletRules_ComputeFees'),
  c(AMULET_RULES, 'AmuletRules_Transfer'),
  c(AMULET, 'Archive'),
];

/** Per kind, the `package-name:Entity:Choice` exercises acting for the party that the action explains. */
export const ALLOWED_CONSEQUENCES: Readonly<Record<ActionKind, ReadonlySet<string>>> = {
  transfer: new Set([
    c(AMULET_RULES, 'AmuletRules_ComputeFees'),
    c(AMULET_RULES, 'AmuletRules_Transfer'),
    c(t(PKG.amulet, 'TransferPreapproval'), 'TransferPreapproval_Send'),
    ...ARCHIVE,
  ]),
  'transfer-instruction-accept': new Set([
    c(AMULET_RULES, 'AmuletRules_Transfer'),
    c(TRANSFER_RULE, 'TransferRule_Transfer'),
    c(TRANSFER_RULE, 'TransferRule_DirectTransfer'),
    c(TRANSFER_RULE, 'TransferRule_TwoStepTransfer'),
    ...UNLOCK,
    ...ARCHIVE,
  ]),
  'transfer-instruction-reject': new Set([...UNLOCK, ...ARCHIVE]),
  'transfer-instruction-withdraw': new Set([...UNLOCK, ...ARCHIVE]),
  'preapproval-send': new Set(),
  'setup-proposal-accept': new Set(),
  'preapproval-proposal': new Set(),
  'allocation-allocate': new Set([c(REGISTRY_FACTORY, 'AllocationFactory_AllocateInternal'), ...ARCHIVE]),
  'allocation-withdraw': new Set([...UNLOCK, ...ARCHIVE]),
  'allocation-cancel': new Set([...UNLOCK, ...ARCHIVE]),
  'allocation-request-reject': new Set(),
  'allocation-request-withdraw': new Set(),
  'ans-entry-request': new Set(),
  'ans-entry-pay': new Set(ANS_LOCK),
  'ans-renewal-pay': new Set(ANS_LOCK),
  'ans-payment-expire': new Set([ROUND_FETCH, c(LOCKED_AMULET, 'LockedAmulet_OwnerExpireLock')]),
  // Generic intents: every sub-exercise is the root's own consequence, except value-moving ones.
  create: new Set(),
  exercise: new Set(),
};

/** The lock step of a name-service payment: the lock, change, and the transfer's reward coupons. */
const ANS_LOCK_CREATES = [
  AMULET,
  LOCKED_AMULET,
  t(PKG.amulet, 'AppRewardCoupon'),
  t(PKG.amulet, 'ValidatorRewardCoupon'),
];

/**
 * Per kind, the `package-name:Entity` templates the action may create where
 * the signing party is a signatory or stakeholder; `undefined` for generic
 * intents, whose creates are the root's own consequences.
 */
export const ALLOWED_CREATES: Readonly<Record<ActionKind, ReadonlySet<string> | undefined>> = {
  transfer: new Set([AMULET, LOCKED_AMULET, HOLDING, ...INSTRUCTIONS, t(PKG.registry, 'ExecutedTransfer')]),
  'transfer-instruction-accept': new Set([AMULET, HOLDING, t(PKG.registry, 'ExecutedTransfer')]),
  'transfer-instruction-reject': new Set([AMULET, HOLDING, t(PKG.registry, 'RejectedTransfer')]),
  'transfer-instruction-withdraw': new Set([AMULET, HOLDING]),
  'preapproval-send': new Set([t(PKG.amulet, 'TransferCommand')]),
  'setup-proposal-accept': new Set([t(PKG.amulet, 'TransferPreapproval'), t(PKG.amulet, 'ValidatorRight')]),
  'preapproval-proposal': new Set(),
  'allocation-allocate': new Set([HOLDING, t(PKG.registry, 'DvpLegAllocation')]),
  'allocation-withdraw': new Set([AMULET, HOLDING]),
  'allocation-cancel': new Set([AMULET, HOLDING]),
  'allocation-request-reject': new Set([t(PKG.settlementApp, 'RejectedDvp')]),
  'allocation-request-withdraw': new Set(),
  'ans-entry-request': new Set([
    t(PKG.walletPayments, 'SubscriptionRequest'),
    t(PKG.nameService, 'AnsEntryContext'),
  ]),
  'ans-entry-pay': new Set([...ANS_LOCK_CREATES, t(PKG.walletPayments, 'SubscriptionInitialPayment')]),
  'ans-renewal-pay': new Set([...ANS_LOCK_CREATES, t(PKG.walletPayments, 'SubscriptionPayment')]),
  'ans-payment-expire': new Set([
    AMULET,
    t(PKG.walletPayments, 'SubscriptionIdleState'),
    t(PKG.walletPayments, 'TerminatedSubscription'),
  ]),
  create: undefined,
  exercise: undefined,
};

/**
 * Choices that move value for the acting party. Under a generic `exercise`
 * intent, any of these acting for the party below the root is unexplained
 * (matched by name alone, whatever the package: stricter, not looser).
 */
export const VALUE_MOVING_CHOICES: ReadonlySet<string> = new Set([
  'TransferFactory_Transfer',
  'TransferPreapproval_Send',
  'AmuletRules_Transfer',
  'TransferRule_Transfer',
  'TransferRule_DirectTransfer',
  'TransferRule_TwoStepTransfer',
  'TransferInstruction_Accept',
  'AllocationFactory_Allocate',
  'ExternalPartyAmuletRules_CreateTransferCommand',
]);

/** A transfer instruction by entity, whatever the package (counted, never allowed by this alone). */
export function isInstructionEntity(entity: string): boolean {
  return entity.endsWith('TransferInstruction') || entity === 'TransferOffer';
}
