/**
 * Typed errors of the store, each with a stable `code` the API maps to a
 * status: `idempotency_conflict` (409), `invalid_state` (409), `not_found`
 * (404), `bad_request` (400, names the field), `schema` (the database schema
 * does not match this build: refuse to start).
 */
export type StoreErrorCode =
  | 'idempotency_conflict'
  | 'invalid_state'
  | 'not_found'
  | 'bad_request'
  | 'schema';

export class StoreError extends Error {
  constructor(
    readonly code: StoreErrorCode,
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = 'StoreError';
  }
}

/** The same idempotency key was used before, by the same caller, with a different request body. */
export class IdempotencyConflictError extends StoreError {
  constructor(
    readonly idempotencyKey: string,
    readonly existingId: string,
  ) {
    super(
      'idempotency_conflict',
      `idempotency key ${JSON.stringify(idempotencyKey)} was already used with a different request (withdrawal ${existingId})`,
      'Idempotency-Key',
    );
    this.name = 'IdempotencyConflictError';
  }
}

/** A state change the withdrawal's current state does not allow. */
export class WithdrawalStateError extends StoreError {
  constructor(
    readonly withdrawalId: string,
    readonly current: string,
    readonly attempted: string,
    /** Said instead of the generic sentence (e.g. why a cancel comes too late). */
    message?: string,
  ) {
    super(
      'invalid_state',
      message ?? `withdrawal ${withdrawalId} is ${current}: cannot move it to ${attempted}`,
    );
    this.name = 'WithdrawalStateError';
  }
}

/**
 * A worker's move refused because another worker now holds the withdrawal's
 * lease (this one's lapsed): the run must stop without touching the row or
 * the ledger again.
 */
export class LeaseLostError extends StoreError {
  constructor(
    readonly withdrawalId: string,
    readonly owner: string,
  ) {
    super(
      'invalid_state',
      `withdrawal ${withdrawalId} is no longer leased to ${owner}: another worker carries it`,
    );
    this.name = 'LeaseLostError';
  }
}

export class NotFoundError extends StoreError {
  constructor(what: string) {
    super('not_found', `${what} not found`);
    this.name = 'NotFoundError';
  }
}

export class BadRequestError extends StoreError {
  constructor(field: string, message: string) {
    super('bad_request', `${field}: ${message}`, field);
    this.name = 'BadRequestError';
  }
}

/** A policy version moved from a status that does not allow it (only a pending version is decided). */
export class PolicyVersionStateError extends StoreError {
  constructor(
    readonly version: number,
    readonly current: string,
    readonly attempted: string,
  ) {
    super(
      'invalid_state',
      `policy version ${version} is ${current}: only a pending version can be moved to ${attempted}; add a new version instead`,
    );
    this.name = 'PolicyVersionStateError';
  }
}

/** An approval request acted on after it was decided (or after it expired). */
export class ApprovalStateError extends StoreError {
  constructor(
    readonly requestId: string,
    readonly current: string,
    readonly attempted: string,
    message?: string,
  ) {
    super(
      'invalid_state',
      message ??
        `approval request ${requestId} is ${current}, no longer pending: cannot ${attempted} it; look at the subject's latest request`,
    );
    this.name = 'ApprovalStateError';
  }
}

/** A second approval (or rejection) of one request by one approver: an approver counts once. */
export class DuplicateApprovalError extends StoreError {
  constructor(
    readonly requestId: string,
    readonly approver: string,
    readonly earlier: 'approve' | 'reject',
  ) {
    super(
      'invalid_state',
      `approver ${approver} has already ${earlier === 'approve' ? 'approved' : 'rejected'} request ${requestId}; one approver counts once`,
    );
    this.name = 'DuplicateApprovalError';
  }
}

/** An approver credential moved from a status that does not allow it. */
export class CredentialStateError extends StoreError {
  constructor(
    readonly credentialId: string,
    readonly current: string,
    readonly attempted: string,
  ) {
    super(
      'invalid_state',
      current === 'revoked'
        ? `approver credential ${credentialId} is revoked: it cannot be used again; register a new key`
        : `approver credential ${credentialId} is ${current}: cannot move it to ${attempted}`,
    );
    this.name = 'CredentialStateError';
  }
}

/** A public key registered a second time (by anyone). */
export class DuplicateCredentialError extends StoreError {
  constructor(readonly existingId: string) {
    super(
      'invalid_state',
      `this public key is already registered (credential ${existingId}); a key is registered once: generate a new key pair`,
      'publicKey',
    );
    this.name = 'DuplicateCredentialError';
  }
}
