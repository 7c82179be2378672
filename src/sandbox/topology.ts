/**
 * External-party topology of the sandbox participant: onboarding through the
 * JSON Ledger API (generate-topology / allocate) and through the Splice
 * validator (topology generate / submit). The modules under ./topology/ hold
 * the parts; this is the entry the routes import.
 */
export {
  allocateExternalParty,
  generateLedgerApiTopology,
  type TopologyContext,
} from './topology/ledger-api.js';
export { OnboardingRefusal, type RefusalKind } from './topology/onboarding.js';
export {
  generateValidatorTopology,
  submitValidatorTopology,
  type ValidatorGenerateRequest,
  type ValidatorGenerateResponse,
  type ValidatorSubmitRequest,
} from './topology/validator.js';
