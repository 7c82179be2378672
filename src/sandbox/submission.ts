/**
 * The sandbox participant's interactive submission: registering what `prepare`
 * handed out, and `execute` checking a submission the way Canton does before
 * anything is committed — strict decode, the hash recomputed under the
 * requested scheme, signatures against the party's registered keys and
 * threshold, deduplication by change id, time windows, inputs still active —
 * then the commit and its completion. Rejections after the prechecks (a
 * duplicate change id too) are completions as well, with Canton's status shape
 * (`CODE(category,correlation-id prefix): cause`, a packed ErrorInfo in the
 * details). Used by the Ledger API routes and by the validator's
 * submit-accept / submit-send.
 */

import { decodePreparedTransaction } from '../hashing/decode.js';
import { encodePreparedTransaction } from '../hashing/encode.js';
import { TransactionError } from '../hashing/errors.js';
import { bytesToBase64, bytesToHex } from '../hashing/input.js';
import type { PreparedTransaction } from '../hashing/model.js';
import { type HashingScheme, hashPreparedTransaction } from '../hashing/transaction-hash.js';
import { changeIdOf, type DeduplicationPeriodJson } from './checks/dedup.js';
import { type PartySignaturesJson, verifyPartySignatures } from './checks/signatures.js';
import { checkTimeWindows } from './checks/time.js';
import { cantonError, E, SandboxError } from './errors.js';
import { type CompletionStatus, InactiveContractError, type Update } from './ledger/store.js';
import type { Preparation, SandboxNetwork } from './network.js';

export interface PreparedOutput {
  /** b64 of the serialized PreparedTransaction. */
  preparedTransaction: string;
  /** The 32-byte hash the participant claims. */
  hash: Uint8Array;
  scheme: HashingScheme;
}

const key = (scheme: HashingScheme, hashHex: string) => `${scheme}:${hashHex}`;

/**
 * What decoding and hashing the exact text `prepare` handed out gives, kept
 * for its execute (used once, the oldest dropped past the bound): the same
 * bytes always decode and hash the same, so execute need not do it again. Any
 * other text (changed, re-encoded, another scheme) is decoded and hashed in
 * full. Independent of `net.preparations`: a forgotten preparation is still
 * refused as before.
 */
interface Digested {
  scheme: HashingScheme;
  decoded: ReturnType<typeof decodePreparedTransaction>;
  hash: Uint8Array;
}
const DIGEST_LIMIT = 256;
const digests = new WeakMap<SandboxNetwork, Map<string, Digested>>();

function remember(net: SandboxNetwork, text: string, d: Digested): void {
  let m = digests.get(net);
  if (!m) {
    m = new Map();
    digests.set(net, m);
  }
  m.delete(text);
  m.set(text, d);
  if (m.size > DIGEST_LIMIT) m.delete(m.keys().next().value as string);
}

function recall(net: SandboxNetwork, text: string, scheme: HashingScheme): Digested | undefined {
  const m = digests.get(net);
  const d = m?.get(text);
  if (!d) return undefined;
  m!.delete(text);
  return d.scheme === scheme ? d : undefined;
}

/**
 * Serializes and hashes a prepared transaction and remembers it for execute.
 * `claimedHash` overrides the hash handed out (fault injection: a participant
 * lying about the hash).
 */
export function registerPreparation(
  net: SandboxNetwork,
  prepared: PreparedTransaction,
  opts: {
    scheme: HashingScheme;
    userId: string;
    onCommit?: Preparation['onCommit'];
    claimedHash?: Uint8Array;
  },
): PreparedOutput {
  const bytes = encodePreparedTransaction(prepared);
  // Hashed from its strict decode, as execute will: what cannot be decoded is never handed out.
  const decoded = decodePreparedTransaction(bytes);
  const hash = hashPreparedTransaction(decoded, { scheme: opts.scheme });
  const hashHex = bytesToHex(hash);
  const p: Preparation = { prepared, scheme: opts.scheme, hashHex, userId: opts.userId };
  if (opts.onCommit) p.onCommit = opts.onCommit;
  net.preparations.set(key(opts.scheme, hashHex), p);
  const text = bytesToBase64(bytes);
  remember(net, text, { scheme: opts.scheme, decoded, hash: hash.slice() });
  return { preparedTransaction: text, hash: opts.claimedHash ?? hash, scheme: opts.scheme };
}

/** Forgets a preparation (a tampering participant withholds the honest one). */
export function forgetPreparation(net: SandboxNetwork, scheme: HashingScheme, hash: Uint8Array): void {
  net.preparations.delete(key(scheme, bytesToHex(hash)));
}

export interface ExecuteInput {
  preparedTransaction: string;
  partySignatures: PartySignaturesJson;
  scheme: HashingScheme;
  userId: string;
  submissionId: string;
  deduplicationPeriod?: DeduplicationPeriodJson | undefined;
}

export interface ExecuteOutcome {
  update: Update;
  completionOffset: number;
}

/** Decodes and checks everything that can be checked before the transaction is sequenced. */
export function precheck(net: SandboxNetwork, input: ExecuteInput) {
  const known = recall(net, input.preparedTransaction, input.scheme);
  let decoded: ReturnType<typeof decodePreparedTransaction>;
  if (known) decoded = known.decoded;
  else
    try {
      decoded = decodePreparedTransaction(input.preparedTransaction);
    } catch (e) {
      if (e instanceof TransactionError || e instanceof Error)
        throw E.invalidArgument(`preparedTransaction: ${e.message}`);
      throw e;
    }
  const hash = known ? known.hash : hashPreparedTransaction(decoded, { scheme: input.scheme });
  const actAs = decoded.metadata.submitterInfo.actAs;
  verifyPartySignatures({
    hash,
    actAs,
    partySignatures: input.partySignatures,
    lookup: (party: string) => net.parties.get(party),
  });
  return { decoded, hash, actAs };
}

/**
 * The whole execute: prechecks, then what happens once the transaction is
 * sequenced (conformance, deduplication, time and activeness, the commit).
 */
export function executeSubmission(net: SandboxNetwork, input: ExecuteInput): ExecuteOutcome {
  const { decoded, hash } = precheck(net, input);
  const k = key(input.scheme, bytesToHex(hash));
  const preparation = net.preparations.get(k);
  return sequence(net, decoded, input, {
    conformance: () =>
      preparation
        ? undefined
        : cantonError(
            'LOCAL_VERDICT_FAILED_MODEL_CONFORMANCE_CHECK',
            8,
            'Rejected transaction due to a failed model conformance check: the transaction does not match the result of interpreting its command on this participant',
            { definiteAnswer: true },
          ),
    onCommit: (update) => {
      const ids = new Map<string, string>();
      for (const e of update.events)
        if (e.kind === 'created') ids.set(e.contract.contractId, e.contract.contractId);
      preparation!.onCommit?.(update, ids);
      net.preparations.delete(k);
    },
  });
}

/**
 * What happens to a transaction once the participant submitted it, externally
 * signed or authorised by the participant alike: deduplication by change id,
 * the conformance check (execute only), the time windows, the activeness of its
 * inputs, the commit and its completion. Every rejection is a completion too.
 */
function sequence(
  net: SandboxNetwork,
  p: PreparedTransaction,
  input: { userId: string; submissionId: string; deduplicationPeriod?: DeduplicationPeriodJson | undefined },
  opts: { conformance?: () => SandboxError | undefined; onCommit?: (update: Update) => void } = {},
): ExecuteOutcome {
  const { actAs, commandId } = p.metadata.submitterInfo;
  const changeId = changeIdOf(input.userId, actAs, commandId);
  const now = net.clock.now();
  const reject = (err: SandboxError): never => {
    net.store.complete({
      commandId,
      submissionId: input.submissionId,
      userId: input.userId,
      actAs,
      updateId: undefined,
      status: completionStatus(err),
      recordTime: now,
      synchronizerId: p.metadata.synchronizerId,
    });
    throw err;
  };
  const guard = (f: () => void) => {
    try {
      f();
    } catch (e) {
      if (e instanceof SandboxError) reject(e);
      throw e;
    }
  };
  // A duplicate change id is rejected like any other post-submission rejection: with a completion.
  guard(() =>
    net.dedup.check({ changeId, submissionId: input.submissionId, now, period: input.deduplicationPeriod }),
  );
  const nonConformant = opts.conformance?.();
  if (nonConformant) reject(nonConformant);
  const m = p.metadata;
  guard(() =>
    checkTimeWindows({
      recordTime: now,
      preparationTime: m.preparationTime,
      minLedgerEffectiveTime: m.minLedgerEffectiveTime,
      maxLedgerEffectiveTime: m.maxLedgerEffectiveTime,
      maxRecordTime: m.maxRecordTime,
    }),
  );
  const inactive = net.inactiveInputs(p);
  if (inactive.length > 0) reject(inactiveContracts(inactive));
  let update: Update;
  try {
    update = net.commitPrepared(p, { userId: input.userId, submissionId: input.submissionId }).update;
    opts.onCommit?.(update);
  } catch (e) {
    if (e instanceof InactiveContractError) reject(inactiveContracts(e.contractIds));
    throw e;
  }
  const completion = net.store.complete({
    offset: update.offset,
    commandId,
    submissionId: input.submissionId,
    userId: input.userId,
    actAs,
    updateId: update.updateId,
    status: { code: 0, message: '' },
    recordTime: update.recordTime,
    synchronizerId: update.synchronizerId,
  });
  net.dedup.recordAccepted({
    changeId,
    submissionId: input.submissionId,
    offset: completion.offset,
    at: now,
  });
  return { update, completionOffset: completion.offset };
}

/**
 * The completion status of a rejection, as Canton renders its errors in a
 * google.rpc.Status: message `CODE(category,correlation-id prefix): cause`,
 * details a packed `google.rpc.ErrorInfo` (reason = the error id, metadata =
 * category, definite answer and the error's context).
 */
export function completionStatus(err: SandboxError): CompletionStatus {
  const b = err.body;
  if (!('code' in b)) return { code: err.grpcCode, message: err.message, errorId: 'REJECTED', details: [] };
  const metadata: Record<string, string> = { category: String(b.errorCategory), ...b.context };
  if (b.definiteAnswer !== undefined) metadata.definite_answer = String(b.definiteAnswer);
  return {
    code: b.grpcCodeValue,
    message: `${b.code}(${b.errorCategory},${b.correlationId.slice(0, 8)}): ${b.cause}`,
    errorId: b.code,
    details: [
      {
        typeUrl: 'type.googleapis.com/google.rpc.ErrorInfo',
        value: bytesToBase64(errorInfo(b.code, metadata)),
      },
    ],
  };
}

/** `google.rpc.ErrorInfo { string reason = 1; string domain = 2; map<string,string> metadata = 3; }`. */
function errorInfo(reason: string, metadata: Record<string, string>): Uint8Array {
  const out: number[] = [];
  const field = (tag: number, bytes: Uint8Array | number[]) => {
    out.push(tag, ...lenOf(bytes.length), ...bytes);
  };
  const utf8 = (t: string) => new TextEncoder().encode(t);
  field(0x0a, utf8(reason));
  for (const [k, v] of Object.entries(metadata)) {
    const kb = utf8(k);
    const vb = utf8(v);
    const entry = [0x0a, ...lenOf(kb.length), ...kb, 0x12, ...lenOf(vb.length), ...vb];
    field(0x1a, entry);
  }
  return Uint8Array.from(out);
}

function lenOf(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

function inactiveContracts(ids: string[]): SandboxError {
  return cantonError(
    'LOCAL_VERDICT_INACTIVE_CONTRACTS',
    11, // InvalidGivenCurrentSystemStateResourceMissing: NOT_FOUND
    `Rejected transaction is referring to inactive contracts ${ids.join(', ')}`,
    { definiteAnswer: true, resources: ids.map((id) => ['CONTRACT_ID', id]) },
  );
}

/** Errors the synchronizer (not the submitting node's prechecks) produces: they go to completions. */
export function isPostSubmission(e: SandboxError): boolean {
  const c = e.code ?? '';
  return (
    c.startsWith('LOCAL_VERDICT_') || c === 'DUPLICATE_COMMAND' || c.includes('TIME') || c.includes('RECORD')
  );
}

export interface LocalSubmitInput {
  prepared: PreparedTransaction;
  userId: string;
  submissionId: string;
  deduplicationPeriod?: DeduplicationPeriodJson | undefined;
}

/**
 * A classic submission by local parties (submit-and-wait): the participant
 * interpreted the command itself and authorises it with its own keys, so there
 * is no hash or signature to check; deduplication, time windows and activeness
 * are checked as for execute, and rejections are completions too.
 */
export function submitLocal(net: SandboxNetwork, input: LocalSubmitInput): ExecuteOutcome {
  return sequence(net, input.prepared, input);
}
