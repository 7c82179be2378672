/**
 * Approvals, the pure part: the statement an approver signs (and its hash),
 * the exact bytes each kind of signature covers (an approval or rejection,
 * an approver's proof of key possession, the service's seal over a
 * credential or a policy version), Ed25519 verification that never throws on
 * what a caller sent, and whether a set of approvers meets a requirement
 * (each approver counted once, in one of its groups: a bipartite matching).
 *
 * Every signed message is the SHA-256 of a domain tag and the canonical JSON
 * of what is signed, so that a signature made for one purpose never verifies
 * for another.
 */
import { createHash } from 'node:crypto';
import { ed25519 } from '@noble/curves/ed25519.js';
import { canonicalJson } from '../store/canonical.js';
import type { PolicyAction, Requirement } from './evaluate.js';
import { checkAssertion, decodeAssertion, decodePasskeyKey, type PasskeyKey } from './webauthn.js';

/** What an approver approves or rejects: one request, exactly as the policy saw it. */
export interface ApprovalStatement {
  v: 1;
  /** The approval request's id (a UUID): a signature for one request never counts for another. */
  request: string;
  /** What is being approved (e.g. a withdrawal): the subject of the request. */
  subject: string;
  party: string;
  entryPoint: string;
  requester: string;
  actions: PolicyAction[];
  policy: { version: number; sha256: string; rule: string };
  requirement: Requirement;
  /** ISO-8601. */
  expiresAt: string;
}

export type ApprovalDecision = 'approve' | 'reject';

const sha256 = (text: string): Uint8Array =>
  new Uint8Array(createHash('sha256').update(text, 'utf8').digest());

/** Hex SHA-256 of the statement's canonical JSON: what the approval message names. */
export function statementHash(s: ApprovalStatement): string {
  return createHash('sha256').update(canonicalJson(s), 'utf8').digest('hex');
}

/** The 32 bytes an approver's key signs to approve or reject the statement with this hash. */
export function approvalMessage(statementHash: string, decision: ApprovalDecision): Uint8Array {
  return sha256(`canton-signer/approval@1\n${canonicalJson({ decision, statement: statementHash })}`);
}

/**
 * Kinds of approver credential: an Ed25519 key the approver holds (signing
 * with the CLI), or a passkey (WebAuthn: the browser's authenticator signs).
 */
export type CredentialKind = 'ed25519' | 'webauthn';

export interface CredentialKey {
  kind: CredentialKind;
  /**
   * ed25519: hex of the raw 32-byte public key. webauthn: the passkey's
   * canonical JSON (src/policy/webauthn.ts encodePasskeyKey): credential id,
   * algorithm, public key, relying party and origin.
   */
  publicKey: string;
}

const HEX_32 = /^[0-9a-fA-F]{64}$/;
/** Canonical padded base64 of 64 bytes: 85 characters, the last of which holds 2 bits, then `==`. */
const BASE64_64 = /^[A-Za-z0-9+/]{85}[AQgw]==$/;

/** The 64 signature bytes of canonical base64, else undefined. */
function signatureBytes(signature: unknown): Uint8Array | undefined {
  if (typeof signature !== 'string' || !BASE64_64.test(signature)) return undefined;
  const bytes = Buffer.from(signature, 'base64');
  return bytes.length === 64 ? new Uint8Array(bytes) : undefined;
}

/**
 * Whether `signature` is the credential's signature of `message`. Ed25519:
 * base64 of the 64 signature bytes, verified strictly (RFC 8032, not
 * ZIP-215). Passkey: the WebAuthn assertion's canonical JSON, whose challenge
 * must be exactly `message`, made for the passkey's relying party from the
 * origin it was registered at, with the user verified.
 * False, never an exception, for anything malformed: an unknown kind, a key
 * or signature of the wrong length or encoding, a non-canonical or
 * small-order point.
 */
export function verifyApproval(key: CredentialKey, message: Uint8Array, signature: string): boolean {
  try {
    if (typeof key !== 'object' || key === null || !(message instanceof Uint8Array)) return false;
    const kind: string = key.kind;
    switch (kind) {
      case 'ed25519': {
        if (typeof key.publicKey !== 'string' || !HEX_32.test(key.publicKey)) return false;
        const sig = signatureBytes(signature);
        if (!sig) return false;
        const publicKey = new Uint8Array(Buffer.from(key.publicKey, 'hex'));
        return ed25519.verify(sig, message, publicKey, { zip215: false });
      }
      case 'webauthn': {
        if (typeof key.publicKey !== 'string' || typeof signature !== 'string') return false;
        const passkey = decodePasskeyKey(key.publicKey);
        return checkAssertion(passkey, decodeAssertion(signature), {
          challenge: message,
          rpId: passkey.rpId,
          origins: [passkey.origin],
          requireUserVerification: true,
        });
      }
      default:
        return false;
    }
  } catch {
    return false;
  }
}

/**
 * The challenge a new passkey signs at registration: bound to the approver
 * registering it and the relying party, so that a registration made for one
 * approver is refused for another.
 */
export function passkeyRegistrationChallenge(approver: string, rpId: string): Uint8Array {
  return sha256(`canton-signer/passkey@1\n${canonicalJson({ approver, rpId })}`);
}

/** The passkey of a credential key, or undefined when it is not a (well-formed) passkey. */
export function passkeyOf(key: CredentialKey): PasskeyKey | undefined {
  if (key.kind !== 'webauthn') return undefined;
  try {
    return decodePasskeyKey(key.publicKey);
  } catch {
    return undefined;
  }
}

/** What a new credential's key signs to prove its holder has the private key. */
export function registrationMessage(key: CredentialKey): Uint8Array {
  return sha256(
    `canton-signer/approver-key@1\n${canonicalJson({ kind: key.kind, publicKey: key.publicKey })}`,
  );
}

/** What the service's seal key signs when an admin activates a credential. */
export function credentialSealMessage(c: {
  id: string;
  approver: string;
  kind: CredentialKind;
  publicKey: string;
  activatedBy: string;
}): Uint8Array {
  const { id, approver, kind, publicKey, activatedBy } = c;
  return sha256(
    `canton-signer/credential@1\n${canonicalJson({ id, approver, kind, publicKey, activatedBy })}`,
  );
}

/** What the service's seal key signs when a policy version comes into force. */
export function policySealMessage(p: { version: number; sha256: string }): Uint8Array {
  return sha256(`canton-signer/policy@1\n${canonicalJson({ version: p.version, sha256: p.sha256 })}`);
}

/** An approver who approved, with the groups of the policy it belongs to. */
export interface Approver {
  approver: string;
  groups: readonly string[];
}

export interface Satisfaction {
  met: boolean;
  /** Per group still short, how many more approvers of it are needed (requirement order). */
  missing: { group: string; need: number }[];
}

/**
 * Whether the approvers meet the requirement when each approver counts once
 * overall, in any one of its groups: a maximum matching of approvers to the
 * requirement's seats. The same approver listed twice is one approver (its
 * groups joined). Seats are filled in requirement order, so when not all can
 * be filled the groups listed first are the ones filled (e.g. 1 of
 * compliance then 2 of treasury, approved by one member of both and one of
 * treasury: treasury is missing 1).
 */
export function satisfies(req: Requirement, approvers: readonly Approver[]): Satisfaction {
  const groupsOf = new Map<string, Set<string>>();
  for (const a of approvers) {
    const set = groupsOf.get(a.approver) ?? new Set<string>();
    for (const g of a.groups) set.add(g);
    groupsOf.set(a.approver, set);
  }
  const people = [...groupsOf.values()];
  // No group can fill more seats than there are approvers: the rest are missing from the start.
  const seats: string[] = [];
  const need = new Map<string, number>();
  for (const { group, count } of req) {
    const n = Math.max(0, Math.floor(count));
    const seated = Math.min(n, people.length);
    for (let i = 0; i < seated; i++) seats.push(group);
    need.set(group, (need.get(group) ?? 0) + n - seated);
  }
  // Kuhn's augmenting paths: a seat once filled stays filled, so earlier seats win.
  const seatOf = new Array<number>(people.length).fill(-1);
  const filled = new Array<boolean>(seats.length).fill(false);
  const augment = (seat: number, visited: boolean[]): boolean => {
    for (let p = 0; p < people.length; p++) {
      if (visited[p] || !people[p]?.has(seats[seat] as string)) continue;
      visited[p] = true;
      const held = seatOf[p] as number;
      if (held === -1 || augment(held, visited)) {
        seatOf[p] = seat;
        return true;
      }
    }
    return false;
  };
  for (let s = 0; s < seats.length; s++)
    filled[s] = augment(s, new Array<boolean>(people.length).fill(false));
  seats.forEach((group, s) => {
    need.set(group, (need.get(group) ?? 0) + (filled[s] ? 0 : 1));
  });
  const missing = [...need].filter(([, n]) => n > 0).map(([group, n]) => ({ group, need: n }));
  return { met: missing.length === 0, missing };
}
