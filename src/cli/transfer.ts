/**
 * Token-standard commands: `transfer` (one transfer, any key scheme, through
 * the Ledger API), `offers list|accept|reject|withdraw` (two-step transfers
 * waiting for an answer) and `holdings list|merge` (a party's holdings, and
 * merging them by self-transfers). PARTY and `--to` accept ANS names. Results
 * go to stdout as text for people or one JSON document with `--json`; a
 * refusal exits 1.
 */
import type { Command } from 'commander';
import { DUST_THRESHOLD } from '../flows/balance.js';
import { type Holding, instrumentText, listHoldings, MAX_INPUTS } from '../flows/holdings.js';
import { mergeHoldings } from '../flows/merge.js';
import { resolveParty } from '../flows/names.js';
import {
  acceptOffer,
  listOffers,
  type OfferActionResult,
  rejectOffer,
  withdrawOffer,
} from '../flows/offers.js';
import { type TransferResult, transfer } from '../flows/transfer.js';
import { shortAmount } from '../intent/decimal.js';
import { amountArg, commandIdArg, instantArg, instrumentArg, intArg, partyArgs } from './args.js';
import { type ConnectionOptions, connectionOptions, withConnection } from './connect.js';
import { print, printJson } from './output.js';

interface OutputOptions {
  json?: boolean;
}

/** Output as `--json` asks; the text with a newline at its end. */
const out = (json: boolean | undefined, value: unknown, text: string): void =>
  json ? printJson(value) : print(text);

const LEDGER_AND_VALIDATOR = { ledger: true, validator: true };

const named = (party: string, name?: string) => (name ? `${name} (${party})` : party);

function transferText(r: TransferResult): string {
  const what = `${shortAmount(r.amount)} ${r.instrument.id}`;
  const lines = [
    r.kind === 'offer'
      ? `offered ${what} to ${named(r.receiver, r.receiverName)}: it waits for the receiver's acceptance until ${r.executeBefore}`
      : r.kind === 'self'
        ? `moved ${what} to ${named(r.sender, r.senderName)} itself (self-transfer)`
        : `sent ${what} to ${named(r.receiver, r.receiverName)} (direct: the receiver has a transfer preapproval)`,
    `update ${r.updateId}, command ${r.commandId}`,
    `${r.inputs.length} input holding(s); signed hash ${r.hash}${r.attempts > 1 ? ` (after ${r.attempts} preparations)` : ''}`,
  ];
  if (r.outcome === 'committed-after-ambiguous')
    lines.push('the execute answer was lost; the commit was confirmed from the completion stream');
  return lines.join('\n');
}

function holdingsText(party: string, hs: Holding[]): string {
  if (hs.length === 0) return `${party} has no holdings`;
  return hs
    .map(
      (h) =>
        `${h.cid}  ${shortAmount(h.amount)} ${instrumentText(h.instrument)}${h.locked ? '  (locked)' : ''}`,
    )
    .join('\n');
}

function actionText(r: OfferActionResult): string {
  const done = { accept: 'accepted', reject: 'rejected', withdraw: 'withdrew' }[r.action];
  return `${done} transfer offer ${r.instructionCid}\nupdate ${r.updateId}, command ${r.commandId}`;
}

export function registerTransfer(program: Command): void {
  connectionOptions(
    program
      .command('transfer')
      .description('Transfer a token-standard holding amount (default Canton Coin) from an external party')
      .requiredOption('--from <party>', 'sending party (in the party book) or its ANS name')
      .requiredOption('--to <party>', 'receiving party id or ANS name')
      .requiredOption('--amount <decimal>', 'amount, e.g. 12.5 (at most 10 decimals)')
      .option('--instrument <admin:id>', 'instrument (default: Canton Coin, DSO:Amulet)')
      .option('--memo <text>', 'reason recorded with the transfer')
      .option('--execute-before <iso>', 'deadline for executing the transfer (default: one hour)')
      .option('--command-id <id>', 'command id (the ledger deduplicates on it; default random)')
      .option('--json', 'print the result as JSON'),
  ).action(
    async (
      opts: ConnectionOptions &
        OutputOptions & {
          from: string;
          to: string;
          amount: string;
          instrument?: string;
          memo?: string;
          executeBefore?: string;
          commandId?: string;
        },
    ) => {
      amountArg(opts.amount, '--amount');
      await partyArgs(opts.keystore, [
        [opts.from, '--from'],
        [opts.to, '--to'],
      ]);
      const instrument = opts.instrument !== undefined ? instrumentArg(opts.instrument) : undefined;
      if (opts.executeBefore !== undefined)
        instantArg(opts.executeBefore, '--execute-before', { future: true });
      if (opts.commandId !== undefined) commandIdArg(opts.commandId);
      const r = await withConnection(opts, LEDGER_AND_VALIDATOR, ({ ctx }) =>
        transfer(ctx, {
          from: opts.from,
          to: opts.to,
          amount: opts.amount,
          ...(instrument ? { instrument } : {}),
          ...(opts.memo !== undefined ? { memo: opts.memo } : {}),
          ...(opts.executeBefore !== undefined ? { executeBefore: opts.executeBefore } : {}),
          ...(opts.commandId !== undefined ? { commandId: opts.commandId } : {}),
        }),
      );
      out(opts.json, r, transferText(r));
    },
  );

  const offers = program.command('offers').description('Two-step transfers waiting for an answer');
  connectionOptions(
    offers
      .command('list')
      .description('Pending transfer offers PARTY sends (out) or receives (in)')
      .argument('<party>', 'party id or ANS name')
      .option('--json', 'print the result as JSON'),
  ).action(async (party: string, opts: ConnectionOptions & OutputOptions) => {
    await partyArgs(opts.keystore, [[party, 'PARTY']]);
    const r = await withConnection(opts, LEDGER_AND_VALIDATOR, async ({ ctx }) => {
      const p = await resolveParty(ctx, party);
      return { partyId: p.partyId, offers: await listOffers(ctx, p.partyId) };
    });
    const text =
      r.offers.length === 0
        ? `no pending transfer offers for ${r.partyId}`
        : r.offers
            .map(
              (o) =>
                `${o.direction === 'in' ? 'IN ' : 'OUT'} ${o.instructionCid}  ${shortAmount(o.amount)} ${o.instrument.id}  ` +
                (o.direction === 'in' ? `from ${o.sender}` : `to ${o.receiver}`) +
                (o.executeBefore ? `  until ${o.executeBefore}` : '') +
                (o.memo ? `  "${o.memo}"` : ''),
            )
            .join('\n');
    out(opts.json, r, text);
  });
  for (const [name, run, who] of [
    ['accept', acceptOffer, 'the receiver takes the offered amount'],
    ['reject', rejectOffer, 'the receiver declines; the sender gets it back'],
    ['withdraw', withdrawOffer, 'the sender takes the offer back'],
  ] as const)
    connectionOptions(
      offers
        .command(name)
        .description(`${name[0]!.toUpperCase()}${name.slice(1)} a transfer offer: ${who}`)
        .argument('<party>', 'the acting party (in the party book) or its ANS name')
        .argument('<cid>', 'the transfer instruction contract id (see offers list)')
        .option('--command-id <id>', 'command id (default random)')
        .option('--json', 'print the result as JSON'),
    ).action(
      async (
        party: string,
        cid: string,
        opts: ConnectionOptions & OutputOptions & { commandId?: string },
      ) => {
        await partyArgs(opts.keystore, [[party, 'PARTY']]);
        if (opts.commandId !== undefined) commandIdArg(opts.commandId);
        const r = await withConnection(opts, LEDGER_AND_VALIDATOR, async ({ ctx }) => {
          const p = await resolveParty(ctx, party);
          return run(ctx, p.partyId, cid, opts.commandId !== undefined ? { commandId: opts.commandId } : {});
        });
        out(opts.json, r, actionText(r));
      },
    );

  const holdings = program.command('holdings').description("A party's token-standard holdings");
  connectionOptions(
    holdings
      .command('list')
      .description("PARTY's holdings (Holding views from the Ledger API)")
      .argument('<party>', 'party id or ANS name')
      .option('--json', 'print the result as JSON'),
  ).action(async (party: string, opts: ConnectionOptions & OutputOptions) => {
    await partyArgs(opts.keystore, [[party, 'PARTY']]);
    const r = await withConnection(opts, LEDGER_AND_VALIDATOR, async ({ ctx }) => {
      const p = await resolveParty(ctx, party);
      return { partyId: p.partyId, holdings: await listHoldings(ctx, p.partyId) };
    });
    out(opts.json, r, holdingsText(r.partyId, r.holdings));
  });
  connectionOptions(
    holdings
      .command('merge')
      .description('Merge PARTY’s unlocked holdings by self-transfers until at most --threshold remain')
      .argument('<party>', 'party id (in the party book) or ANS name')
      .option('--threshold <n>', 'merge until at most this many remain', '10')
      .option('--batch <n>', 'inputs per self-transfer (2 to 100)', '100')
      .option('--instrument <admin:id>', 'instrument (default: Canton Coin)')
      .option('--fee-reserve <decimal>', 'left out of each merge for holding fees (default 0)')
      .option('--json', 'print the result as JSON'),
  ).action(
    async (
      party: string,
      opts: ConnectionOptions &
        OutputOptions & { threshold: string; batch: string; instrument?: string; feeReserve?: string },
    ) => {
      await partyArgs(opts.keystore, [[party, 'PARTY']]);
      const instrument = opts.instrument !== undefined ? instrumentArg(opts.instrument) : undefined;
      const threshold = intArg(opts.threshold, '--threshold', 1);
      const batch = intArg(opts.batch, '--batch', 2, MAX_INPUTS);
      if (opts.feeReserve !== undefined) amountArg(opts.feeReserve, '--fee-reserve', { zero: true });
      const r = await withConnection(opts, LEDGER_AND_VALIDATOR, async ({ ctx }) => {
        const p = await resolveParty(ctx, party);
        return mergeHoldings(ctx, p.partyId, {
          threshold,
          batch,
          ...(instrument ? { instrument } : {}),
          ...(opts.feeReserve !== undefined ? { feeReserve: opts.feeReserve } : {}),
        });
      });
      const text =
        r.transactions.length === 0
          ? `${r.partyId} holds ${r.before.count} unlocked holding(s): nothing to merge (threshold ${threshold})`
          : [
              `merged ${r.before.count} unlocked holding(s) into ${r.after.count} with ${r.transactions.length} self-transfer(s)`,
              `total ${shortAmount(r.before.total)} → ${shortAmount(r.after.total)}; dust (< ${DUST_THRESHOLD}) ${r.dustBefore} → ${r.dustAfter}`,
              ...r.transactions.map((t) => `update ${t.updateId} (${t.inputs.length} inputs)`),
            ].join('\n');
      out(opts.json, r, text);
    },
  );
}
