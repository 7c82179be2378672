/**
 * The party book: which external parties this signer holds, with the key
 * label that signs for each and the public key registered on the ledger at
 * onboarding (what every signature is verified against). File form: one JSON
 * document `parties.json` in the keystore folder, replaced atomically and durably (key-files.ts `replaceFile`); the
 * service's database store implements the same interface.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { readTextIfAny, replaceFile } from '../keys/key-files.js';
import type { KeyScheme } from '../keys/schemes.js';

export interface PartyRecord {
  partyId: string;
  hint: string;
  keyLabel: string;
  scheme: KeyScheme;
  /** Fingerprint of the registered key (= the party's namespace for single-key parties). */
  fingerprint: string;
  /** SubjectPublicKeyInfo DER of the registered key, base64. */
  publicKeySpki: string;
  /** Onboarding path. */
  via: 'validator' | 'ledger-api';
  /** The participant hosting the party, as the Ledger API names it (`participant1::1220…`, no `PAR::`). */
  participantUid?: string;
  synchronizerId?: string;
  /** ANS name, when the party has one. */
  ansName?: string;
  createdAt: string;
}

export interface PartyBook {
  get(partyId: string): Promise<PartyRecord | undefined>;
  list(): Promise<PartyRecord[]>;
  put(record: PartyRecord): Promise<void>;
}

const RecordSchema = z.object({
  partyId: z.string(),
  hint: z.string(),
  keyLabel: z.string(),
  scheme: z.enum(['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1', 'ecdsa-p384']),
  fingerprint: z.string(),
  publicKeySpki: z.string(),
  via: z.enum(['validator', 'ledger-api']),
  participantUid: z.string().optional(),
  synchronizerId: z.string().optional(),
  ansName: z.string().optional(),
  createdAt: z.string(),
});
const FileSchema = z.object({ format: z.literal('canton-signer/parties@1'), parties: z.array(RecordSchema) });

export class MemoryPartyBook implements PartyBook {
  private readonly m = new Map<string, PartyRecord>();
  async get(id: string) {
    return this.m.get(id);
  }
  async list() {
    return [...this.m.values()];
  }
  async put(r: PartyRecord) {
    this.m.set(r.partyId, r);
  }
}

export class FilePartyBook implements PartyBook {
  private tail: Promise<unknown> = Promise.resolve();
  constructor(readonly dir: string) {}
  get path(): string {
    return join(this.dir, 'parties.json');
  }

  private async load(): Promise<PartyRecord[]> {
    const text = await readTextIfAny(this.path);
    if (text === undefined) return [];
    const parsed = FileSchema.safeParse(JSON.parse(text));
    if (!parsed.success)
      throw new Error(`${this.path} is not a canton-signer party book: ${parsed.error.issues[0]?.message}`);
    return parsed.data.parties as PartyRecord[];
  }

  async get(id: string) {
    return (await this.load()).find((p) => p.partyId === id);
  }
  async list() {
    return this.load();
  }
  put(r: PartyRecord): Promise<void> {
    const run = this.tail.then(async () => {
      const all = (await this.load()).filter((p) => p.partyId !== r.partyId);
      all.push(r);
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      await replaceFile(
        this.dir,
        this.path,
        `${JSON.stringify({ format: 'canton-signer/parties@1', parties: all }, null, 2)}\n`,
      );
    });
    this.tail = run.catch(() => {});
    return run;
  }
}
