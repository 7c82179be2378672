/**
 * The flow journal: one record per pipeline step that matters (refused,
 * signed, submitted, committed, rejected, ambiguous, resolved). It holds
 * hashes, parties, intents, reasons and ledger ids, never key material or
 * credentials. Two implementations of one interface: in memory (tests,
 * library use) and an append-only JSON-lines file (the CLI; fsync'd per record);
 * both can be read back by party (`partyRecords`).
 * The service's database store implements the same interface.
 */
import { mkdirSync } from 'node:fs';
import { appendFile, open } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Intent } from '../intent/model.js';
import { readTextIfAny } from '../keys/key-files.js';

export type JournalStep =
  | 'refused'
  | 'signed'
  | 'submitted'
  | 'committed'
  | 'rejected'
  | 'ambiguous'
  | 'resolved'
  | 'reprepared'
  | 'exported' // the party's key is held offline: the signing request went across the air gap
  | 'awaiting_approval' // the policy asks for approvals by people first: nothing was signed
  | 'failed'; // an error that is not a refusal nor the ledger's answer (network, key backend, our own writes)

export interface JournalRecord {
  at: string;
  flow: string;
  step: JournalStep;
  partyId: string;
  commandId?: string;
  intent?: Intent;
  /** Hex of the hash signed (or refused). */
  hash?: string;
  /** Fingerprint of the key that signed. */
  signedBy?: string;
  attempt?: number;
  reason?: string;
  message?: string;
  updateId?: string;
  /** Small flow-specific facts (contract ids, nonce, offsets). */
  facts?: Record<string, string>;
}

export interface FlowRecorder {
  record(r: Omit<JournalRecord, 'at'>): Promise<void>;
  /**
   * The records this journal holds about a party (records without a command
   * id, e.g. an onboarding's), in order. Absent when the journal cannot be
   * read back.
   */
  partyRecords?(partyId: string): Promise<JournalRecord[]>;
}

export class MemoryRecorder implements FlowRecorder {
  readonly records: JournalRecord[] = [];
  async record(r: Omit<JournalRecord, 'at'>): Promise<void> {
    this.records.push({ at: new Date().toISOString(), ...r });
  }
  steps(): string[] {
    return this.records.map((r) => r.step);
  }
  async partyRecords(partyId: string): Promise<JournalRecord[]> {
    return this.records.filter((r) => r.partyId === partyId && r.commandId === undefined);
  }
}

/** Appends one JSON line per record and syncs it to disk before returning. */
export class FileRecorder implements FlowRecorder {
  private tail: Promise<void> = Promise.resolve();
  constructor(readonly path: string) {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  }
  record(r: Omit<JournalRecord, 'at'>): Promise<void> {
    const line = `${JSON.stringify({ at: new Date().toISOString(), ...r })}\n`;
    const run = this.tail.then(async () => {
      await appendFile(this.path, line, { mode: 0o600 });
      const fh = await open(this.path, 'r');
      try {
        await fh.sync();
      } finally {
        await fh.close();
      }
    });
    this.tail = run.catch(() => {});
    return run;
  }
  /** Reads the file back (after the writes under way); a torn last line is not a record. */
  async partyRecords(partyId: string): Promise<JournalRecord[]> {
    await this.tail;
    const text = (await readTextIfAny(this.path)) ?? '';
    const out: JournalRecord[] = [];
    for (const line of text.split('\n')) {
      if (!line.includes(partyId)) continue;
      let r: JournalRecord;
      try {
        r = JSON.parse(line) as JournalRecord;
      } catch {
        continue;
      }
      if (r.partyId === partyId && r.commandId === undefined) out.push(r);
    }
    return out;
  }
}
