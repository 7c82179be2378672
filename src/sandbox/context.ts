/**
 * What every sandbox HTTP route is given: the simulated network, the fault
 * switches, the token checker and the scan history. One context per running
 * sandbox; the servers are thin views over it.
 */
import type { FastifyRequest } from 'fastify';
import type { SandboxAuth } from './auth.js';
import { spliceError } from './errors.js';
import type { FaultController } from './faults.js';
import { type SandboxNetwork, VALIDATOR_USER } from './network.js';
import type { ScanHistory } from './scan/history.js';

export interface SandboxContext {
  net: SandboxNetwork;
  faults: FaultController;
  auth: SandboxAuth;
  scan: ScanHistory;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The participant user the bearer token acts as; undefined without a token (auth not required). */
    sandboxUser: string | undefined;
  }
  interface FastifyContextConfig {
    /** Which service answers (error shape, fault matching): `ledger-api`, `validator`, `scan`, `scan-proxy`, `registry`, `sandbox`. */
    service?: string;
    /** Fault-matching name, `<service>.<operation>`. */
    operation?: string;
    /** Served without authentication (`security: []` in the service's spec): a token is not even looked at. */
    public?: boolean;
  }
}

/**
 * The validator's admin endpoints act as the validator operator: a token for
 * another user is 403, as Splice answers a JWT whose subject is not the
 * operator. Without a token (auth not required) the caller is the operator.
 */
export function requireValidatorOperator(req: FastifyRequest): void {
  const u = req.sandboxUser;
  if (u !== undefined && u !== VALIDATOR_USER)
    throw spliceError(403, `Authorization failed: user ${u} is not the validator operator`);
}
