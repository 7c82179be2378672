/**
 * Test controls that put the participant through what an operator's node goes
 * through: a restore from a backup (the same transactions come back under new
 * offsets) and a major upgrade (offsets start again; the active contracts are
 * imported as transactions at the smallest record time). Update ids, record
 * times and contract ids survive a restore; offsets do not.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { SandboxContext } from '../context.js';
import { SandboxError } from '../errors.js';
import { isoMicros } from '../ledger/clock.js';
import type { SandboxNetwork } from '../network.js';

/** 0001-01-01T00:00:00Z in µs since the epoch: the record time of imported contracts. */
export const IMPORT_RECORD_TIME = -62_135_596_800_000_000n;

const RestoreSchema = z.strictObject({
  keepUntilOffset: z.number().int().min(0).optional(),
  gap: z.number().int().min(0).max(1_000_000_000).optional(),
});

export interface RestoreAnswer {
  /** The backup's last offset: what is at or before it keeps its offset. */
  keptUntilOffset: number;
  /** Updates that came back under new offsets. */
  renumbered: number;
  /** Offsets that only rejected commands took (not replayed). */
  droppedRejections: number;
  /** The new offset of the first update after the backup (absent when none came back). */
  firstRenumberedOffset?: number;
  ledgerEnd: number;
}

/** Restores the participant from a backup at `keepUntilOffset` (default 0) and re-synchronises it. */
export function restoreParticipant(
  net: SandboxNetwork,
  opts: { keepUntilOffset?: number; gap?: number } = {},
): RestoreAnswer {
  const keep = opts.keepUntilOffset ?? 0;
  const end = net.store.ledgerEnd();
  if (keep > end)
    throw new SandboxError(400, {
      error: `keepUntilOffset: ${keep} is past the ledger end ${end}; pass an offset the participant has`,
    });
  const r = net.store.renumberAfter(keep, opts.gap ?? 0);
  const first = net.store.updates(keep)[0]?.offset;
  return {
    keptUntilOffset: keep,
    renumbered: r.renumbered,
    droppedRejections: r.droppedRejections,
    ...(first === undefined ? {} : { firstRenumberedOffset: first }),
    ledgerEnd: net.store.ledgerEnd(),
  };
}

export interface UpgradeAnswer {
  migrationId: number;
  /** Import transactions, one per active contract, at offsets 1..imported. */
  imported: number;
  importRecordTime: string;
  ledgerEnd: number;
}

/** A major upgrade: a new migration id, offsets from 1, the active contracts imported. */
export function majorUpgrade(net: SandboxNetwork): UpgradeAnswer {
  const imports = net.store.restartFromImport(IMPORT_RECORD_TIME, net.synchronizerId);
  net.migrationId += 1;
  net.dedup.clear();
  return {
    migrationId: net.migrationId,
    imported: imports.length,
    importRecordTime: isoMicros(IMPORT_RECORD_TIME),
    ledgerEnd: net.store.ledgerEnd(),
  };
}

export function registerRecoveryRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const config = { config: { service: 'sandbox' } };
  app.post('/sandbox/participant/restore', config, async (req) => {
    const r = RestoreSchema.safeParse(req.body ?? {});
    if (!r.success) {
      const issue = r.error.issues[0]!;
      const at = issue.path.length > 0 ? issue.path.map(String).join('.') : 'body';
      throw new SandboxError(400, { error: `${at}: ${issue.message}` });
    }
    return restoreParticipant(ctx.net, r.data);
  });
  app.post('/sandbox/participant/major-upgrade', config, async () => majorUpgrade(ctx.net));
}
