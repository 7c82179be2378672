/**
 * `canton-signer party …`: onboard an external party (validator or Ledger API
 * path), show one (book record, hosting, ANS name, preapproval), list the
 * party book, and show a party's balance. PARTY arguments accept an ANS name.
 * Text for people, one JSON object with --json; refusals exit 1 (src/cli/main.ts).
 */
import { type Command, Option } from 'commander';
import { type BalanceReport, partyBalance } from '../flows/balance.js';
import { resolveParty } from '../flows/names.js';
import {
  type OnboardResult,
  onboardViaLedgerApi,
  onboardViaValidator,
  type PartyView,
  showParty,
} from '../flows/onboard.js';
import { FilePartyBook, type PartyRecord } from '../store/parties.js';
import { hintArg, partyArgs } from './args.js';
import { type ConnectionOptions, connectionOptions, withConnection } from './connect.js';
import { UsageError } from './input.js';
import { keystoreFolder } from './options.js';
import { out } from './output.js';

const lines = (rows: [string, string | undefined][]) =>
  `${rows
    .filter((r): r is [string, string] => r[1] !== undefined)
    .map(([k, v]) => `${`${k}:`.padEnd(14)}${v}`)
    .join('\n')}\n`;

function recordRows(r: PartyRecord): [string, string | undefined][] {
  return [
    ['party', r.partyId],
    ['key', `${r.keyLabel} (${r.scheme}, ${r.fingerprint})`],
    ['via', r.via],
    ['participant', r.participantUid],
    ['synchronizer', r.synchronizerId],
    ['since', r.createdAt],
  ];
}

const STATUS_TEXT: Record<OnboardResult['status'], string> = {
  new: 'onboarded',
  existing: 'already onboarded (in the party book; nothing signed)',
  recovered: 'already hosted; added to the party book (nothing signed)',
};

function onboardText(r: OnboardResult): string {
  return lines([
    ['status', STATUS_TEXT[r.status]],
    ...recordRows(r.party),
    ['signed', r.signedHashes.length ? r.signedHashes.join('\n              ') : undefined],
    ['warning', r.warnings?.length ? r.warnings.join('\n              ') : undefined],
  ]);
}

function showText(v: PartyView & { name?: string }): string {
  const rows: [string, string | undefined][] = v.record ? recordRows(v.record) : [['party', v.partyId]];
  if (v.name) rows.splice(1, 0, ['given as', v.name]);
  if (v.hosted !== undefined)
    rows.push([
      'hosted',
      v.hosted
        ? `yes, on ${v.hosted.synchronizerId}${v.hosted.permission ? ` (${v.hosted.permission})` : ''}`
        : 'no',
    ]);
  if (v.ansName !== undefined) rows.push(['ANS name', v.ansName ?? '(none)']);
  if (v.preapproval !== undefined)
    rows.push([
      'preapproval',
      v.preapproval
        ? `${v.preapproval.contractId}${v.preapproval.provider ? ` (provider ${v.preapproval.provider}` : ''}${
            v.preapproval.expiresAt ? `, expires ${v.preapproval.expiresAt}` : ''
          }${v.preapproval.provider ? ')' : ''}`
        : '(none)',
    ]);
  for (const n of v.notes) rows.push(['note', n]);
  return lines(rows);
}

function balanceText(b: BalanceReport, name?: string): string {
  const rows: [string, string | undefined][] = [
    ['party', b.partyId],
    ['given as', name],
  ];
  if (b.validator)
    rows.push([
      'validator',
      `unlocked ${b.validator.totalUnlocked}, locked ${b.validator.totalLocked}, holding fees ${b.validator.holdingFees} (round ${b.validator.computedAsOfRound})`,
    ]);
  if (b.holdings.length === 0) rows.push(['holdings', '(none)']);
  for (const h of b.holdings)
    rows.push([
      'holding',
      `${h.instrument.id} (${h.instrument.admin}): unlocked ${h.unlocked}, locked ${h.locked}, ${h.count} contract${h.count === 1 ? '' : 's'}`,
    ]);
  if (b.dustCount > 0) rows.push(['dust', `${b.dustCount} holding${b.dustCount === 1 ? '' : 's'}`]);
  for (const w of b.warnings) rows.push(['warning', w]);
  return lines(rows);
}

type Via = 'validator' | 'ledger-api';

export function registerParty(program: Command): void {
  const party = program.command('party').description('Onboard and inspect external parties');

  connectionOptions(
    party
      .command('onboard')
      .description('Onboard hint::fingerprint(key) as an external party (topology checked before signing)')
      .requiredOption('--hint <hint>', 'party hint (left half of the party id)')
      .requiredOption('--key <label>', 'signing key label')
      .addOption(
        new Option('--via <path>', 'onboarding path (validator: Ed25519 keys only)')
          .choices(['validator', 'ledger-api'])
          .default('ledger-api'),
      )
      .option('--synchronizer <id>', 'synchronizer to allocate on (Ledger API path)')
      .option(
        '--participant <uid>',
        'the participant the party must be hosted on (refused, nothing signed, if the participant reports another id)',
      )
      .option('--no-grant-rights', 'do not grant the Ledger API user CanActAs/CanReadAs on the party')
      .option('--json', 'print JSON'),
  ).action(
    async (
      opts: ConnectionOptions & {
        hint: string;
        key: string;
        via: Via;
        synchronizer?: string;
        participant?: string;
        grantRights: boolean;
        json?: boolean;
      },
    ) => {
      if (opts.via === 'validator' && opts.synchronizer !== undefined)
        throw new UsageError('--synchronizer applies to --via ledger-api only');
      hintArg(opts.hint);
      const base = {
        hint: opts.hint,
        keyLabel: opts.key,
        grantRights: opts.grantRights,
        ...(opts.participant !== undefined ? { participantId: opts.participant } : {}),
      };
      const r = await withConnection(
        opts,
        { ledger: true, validator: opts.via === 'validator' },
        ({ ctx }) =>
          opts.via === 'validator'
            ? onboardViaValidator(ctx, base)
            : onboardViaLedgerApi(ctx, {
                ...base,
                ...(opts.synchronizer !== undefined ? { synchronizerId: opts.synchronizer } : {}),
              }),
      );
      out(opts.json, r, onboardText(r));
    },
  );

  connectionOptions(
    party
      .command('show')
      .description('Show a party: book record, hosting, ANS name, transfer preapproval')
      .argument('<party>', 'party id or ANS name')
      .option('--json', 'print JSON'),
  ).action(async (arg: string, opts: ConnectionOptions & { json?: boolean }) => {
    await partyArgs(opts.keystore, [[arg, 'PARTY']]);
    const v = await withConnection(opts, { ledger: true }, async ({ ctx }) => {
      const { partyId, name } = await resolveParty(ctx, arg);
      return { ...(await showParty(ctx, partyId)), ...(name ? { name } : {}) };
    });
    out(opts.json, v, showText(v));
  });

  party
    .command('list')
    .description("List the signer's party book")
    .addOption(
      new Option('--keystore <dir>', 'keystore folder (default $CANTON_SIGNER_KEYSTORE or ./keystore)'),
    )
    .option('--json', 'print JSON')
    .action(async (opts: { keystore?: string; json?: boolean }) => {
      const all = await new FilePartyBook(keystoreFolder(opts.keystore)).list();
      const text =
        all.length === 0
          ? 'no parties\n'
          : `${all.map((p) => `${p.partyId}\t${p.keyLabel}\t${p.scheme}\t${p.via}${p.ansName ? `\t${p.ansName}` : ''}`).join('\n')}\n`;
      out(opts.json, { parties: all }, text);
    });

  connectionOptions(
    party
      .command('balance')
      .description("Show a party's holdings (and the validator's view, when configured)")
      .argument('<party>', 'party id or ANS name')
      .option('--json', 'print JSON'),
  ).action(async (arg: string, opts: ConnectionOptions & { json?: boolean }) => {
    await partyArgs(opts.keystore, [[arg, 'PARTY']]);
    const { b, name } = await withConnection(opts, { ledger: true }, async ({ ctx }) => {
      const { partyId, name } = await resolveParty(ctx, arg);
      return { b: await partyBalance(ctx, partyId), name };
    });
    out(opts.json, { ...b, ...(name ? { name } : {}) }, balanceText(b, name));
  });
}
