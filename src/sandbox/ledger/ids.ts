/**
 * Identifiers the sandbox hands out: update ids (68-hex multihash form, as
 * participants print them), contract-id suffixes for contracts a transaction
 * created, fresh contract ids for contracts the sandbox's own automation
 * creates, and party ids for the sandbox's built-in parties.
 */
import { createHash, randomBytes } from 'node:crypto';

const sha256 = (...parts: (string | Uint8Array)[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest('hex');
};

/** `1220` + 64 hex: how update ids look on the JSON API. */
export function newUpdateId(): string {
  return `1220${randomBytes(32).toString('hex')}`;
}

/**
 * The suffix the participant appends to a contract id created in a committed
 * transaction (V1 ids: `00` ‖ discriminator ‖ `ca11` ‖ 34-byte unicum, as in the real vectors), so
 * unsuffixed ids from a prepared transaction become 138-hex ids.
 */
export function suffixContractId(unsuffixed: string, updateId: string): string {
  return `${unsuffixed}ca111220${sha256('canton-signer/sandbox/suffix', updateId, unsuffixed)}`;
}

/** A fresh, already suffixed contract id (for contracts the sandbox itself creates). */
export function freshContractId(): string {
  const disc = sha256('canton-signer/sandbox/disc', randomBytes(32));
  return suffixContractId(`00${disc}`, randomBytes(16).toString('hex'));
}

/** A namespace fingerprint for a built-in identity (deterministic per name and instance seed). */
export function builtinNamespace(name: string, seed: string): string {
  return `1220${sha256('canton-signer/sandbox/namespace', seed, name)}`;
}
