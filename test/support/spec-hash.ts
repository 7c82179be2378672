/**
 * An independent, deliberately naive implementation of the hash encodings of
 * hashing-spec §3–§8 (Buffer concatenation, no streaming), used by tests to
 * compute expected hashes by hand. It shares no code with src/hashing: values
 * are passed in already encoded (bytes from the Canton test vectors or written
 * out literally in the tests).
 */
import { createHash } from 'node:crypto';

export type Scheme = 'v2' | 'v3';

export const PURPOSE = Buffer.from([0, 0, 0, 0x30]);

export function sha256(...parts: Uint8Array[]): Buffer {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
}

export const u8 = (b: number): Buffer => Buffer.from([b]);

export function be32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

export function be64(n: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt.asUintN(64, n));
  return b;
}

export const bytes = (b: Uint8Array): Buffer => Buffer.concat([be32(b.length), b]);
export const str = (s: string): Buffer => bytes(Buffer.from(s, 'utf8'));
export const hex = (s: string): Buffer => bytes(Buffer.from(s, 'hex'));
export const strings = (xs: readonly string[]): Buffer => Buffer.concat([be32(xs.length), ...xs.map(str)]);
export const opt = (x: Buffer | undefined): Buffer => (x === undefined ? u8(0) : Buffer.concat([u8(1), x]));

export interface SpecIdentifier {
  packageId: string;
  moduleName: string;
  entityName: string;
}

export function identifier(id: SpecIdentifier): Buffer {
  return Buffer.concat([
    str(id.packageId),
    strings(id.moduleName.split('.')),
    strings(id.entityName.split('.')),
  ]);
}

export interface SpecCreate {
  lfVersion: string;
  seed: Uint8Array | undefined;
  contractId: string;
  packageName: string;
  templateId: SpecIdentifier;
  /** The value encoding of the argument (§6), already computed. */
  argument: Uint8Array;
  signatories: string[];
  stakeholders: string[];
}

/** §5.1 create (V2) / §8 create_v3 without key. */
export function createEncoding(scheme: Scheme, c: SpecCreate): Buffer {
  return Buffer.concat([
    scheme === 'v2' ? u8(1) : Buffer.alloc(0),
    str(c.lfVersion),
    u8(0),
    opt(c.seed === undefined ? undefined : Buffer.from(c.seed)),
    hex(c.contractId),
    str(c.packageName),
    identifier(c.templateId),
    c.argument,
    strings(c.signatories),
    strings(c.stakeholders),
    scheme === 'v3' ? u8(0) : Buffer.alloc(0), // no key
  ]);
}

export interface SpecExercise {
  lfVersion: string;
  seed: Uint8Array;
  contractId: string;
  packageName: string;
  templateId: SpecIdentifier;
  signatories: string[];
  stakeholders: string[];
  actingParties: string[];
  choiceId: string;
  chosenValue: Uint8Array;
  consuming: boolean;
  choiceObservers: string[];
  childHashes: Uint8Array[];
}

/** §5.1 exercise (V2) / §8 exercise_v3, no interface, no result, no key, not by key. */
export function exerciseEncoding(scheme: Scheme, e: SpecExercise): Buffer {
  return Buffer.concat([
    scheme === 'v2' ? u8(1) : Buffer.alloc(0),
    str(e.lfVersion),
    u8(1),
    Buffer.from(e.seed),
    hex(e.contractId),
    str(e.packageName),
    identifier(e.templateId),
    strings(e.signatories),
    strings(e.stakeholders),
    strings(e.actingParties),
    u8(0), // interface_id absent
    str(e.choiceId),
    e.chosenValue,
    u8(e.consuming ? 1 : 0),
    u8(0), // exercise_result absent
    strings(e.choiceObservers),
    scheme === 'v3' ? Buffer.concat([u8(0), u8(0)]) : Buffer.alloc(0), // by_key false, key absent
    be32(e.childHashes.length),
    ...e.childHashes,
  ]);
}

export function transactionHash(version: string, rootHashes: Uint8Array[]): Buffer {
  return sha256(PURPOSE, str(version), be32(rootHashes.length), ...rootHashes);
}

export interface SpecMetadata {
  actAs: string[];
  commandId: string;
  transactionUuid: string;
  mediatorGroup: number;
  synchronizerId: string;
  minLet: bigint | undefined;
  maxLet: bigint | undefined;
  preparationTime: bigint;
  /** created_at and SHA-256 of the seedless create encoding of each input contract. */
  inputs: { createdAt: bigint; createHash: Uint8Array }[];
  maxRecordTime: bigint | undefined;
}

export function metadataHash(scheme: Scheme, m: SpecMetadata): Buffer {
  return sha256(
    PURPOSE,
    scheme === 'v2' ? u8(1) : Buffer.alloc(0),
    strings(m.actAs),
    str(m.commandId),
    str(m.transactionUuid),
    be32(m.mediatorGroup),
    str(m.synchronizerId),
    opt(m.minLet === undefined ? undefined : be64(m.minLet)),
    opt(m.maxLet === undefined ? undefined : be64(m.maxLet)),
    be64(m.preparationTime),
    be32(m.inputs.length),
    ...m.inputs.flatMap((i) => [be64(i.createdAt), Buffer.from(i.createHash)]),
    scheme === 'v3'
      ? opt(m.maxRecordTime === undefined ? undefined : be64(m.maxRecordTime))
      : Buffer.alloc(0),
  );
}

export function finalHash(scheme: Scheme, txHash: Uint8Array, metaHash: Uint8Array): Buffer {
  return sha256(PURPOSE, u8(scheme === 'v2' ? 2 : 3), txHash, metaHash);
}
