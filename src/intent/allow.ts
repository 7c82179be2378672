/**
 * What an action may do for the signing party below its root: per action
 * kind, the (template entity, choice) pairs of exercises acting for the party
 * that the action explains. Derived from the real vectors in
 * ../shared/vectors/real and the sandbox builders (src/sandbox/prepared):
 *
 * - transfer: AmuletRules_ComputeFees and AmuletRules_Transfer (Amulet, both
 *   paths), TransferPreapproval_Send (direct), Archive of the declared input
 *   holdings (Amulet, registry Holding);
 * - accept: AmuletRules_Transfer (Amulet), TransferRule_Transfer /
 *   _DirectTransfer / _TwoStepTransfer (registry), unlocking the locked
 *   holding, Archive of holdings the transaction created or the instruction locked;
 * - reject / withdraw / allocation withdraw / cancel: unlocking the locked holding;
 * - allocate: AllocationFactory_AllocateInternal (registry), Archive of inputs;
 * - preapproval send, setup acceptance, proposal: nothing.
 *
 * Consuming exercises are further limited by the check to declared inputs
 * and contracts the transaction itself created.
 */
import type { ActionKind } from './model.js';

const UNLOCK = ['LockedAmulet:LockedAmulet_Unlock', 'Holding:Holding_Unlock'];
const ARCHIVE = ['Amulet:Archive', 'LockedAmulet:Archive', 'Holding:Archive'];

export const ALLOWED_CONSEQUENCES: Readonly<Record<ActionKind, ReadonlySet<string>>> = {
  transfer: new Set([
    'AmuletRules:AmuletRules_ComputeFees',
    'AmuletRules:AmuletRules_Transfer',
    'TransferPreapproval:TransferPreapproval_Send',
    ...ARCHIVE,
  ]),
  'transfer-instruction-accept': new Set([
    'AmuletRules:AmuletRules_Transfer',
    'TransferRule:TransferRule_Transfer',
    'TransferRule:TransferRule_DirectTransfer',
    'TransferRule:TransferRule_TwoStepTransfer',
    ...UNLOCK,
    ...ARCHIVE,
  ]),
  'transfer-instruction-reject': new Set([...UNLOCK, ...ARCHIVE]),
  'transfer-instruction-withdraw': new Set([...UNLOCK, ...ARCHIVE]),
  'preapproval-send': new Set(),
  'setup-proposal-accept': new Set(),
  'preapproval-proposal': new Set(),
  'allocation-allocate': new Set(['AllocationFactory:AllocationFactory_AllocateInternal', ...ARCHIVE]),
  'allocation-withdraw': new Set([...UNLOCK, ...ARCHIVE]),
  'allocation-cancel': new Set([...UNLOCK, ...ARCHIVE]),
  'allocation-request-reject': new Set(),
  'allocation-request-withdraw': new Set(),
  // Generic intents: every sub-exercise is the root's own consequence, except value-moving ones.
  create: new Set(),
  exercise: new Set(),
};

/**
 * Choices that move value for the acting party. Under a generic `exercise`
 * intent, any of these acting for the party below the root is unexplained.
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
