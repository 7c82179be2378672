/**
 * Flow commands on the validator path and the generic signer:
 * `setup-accept`, `send` (legacy preapproval send, tracked), `preapprovals`
 * (expiry watch) and `sign-and-execute` (a prepared transaction plus an
 * explicit intent; `--verify-only` signs nothing). Results go to stdout
 * (text, or one JSON document with `--json`); a refusal exits 1.
 */
import type { Command } from 'commander';
import { type SendResult, sendViaPreapproval, type TrackResult } from '../flows/preapproval-send.js';
import { watchPreapprovals } from '../flows/preapproval-watch.js';
import { acceptSetupProposal } from '../flows/setup-accept.js';
import { signAndExecute, verifyOnly } from '../flows/sign-execute.js';
import type { HashingScheme } from '../hashing/transaction-hash.js';
import { IntentSchema } from '../intent/model.js';
import { amountArg, commandIdArg, instantArg, partyArgs } from './args.js';
import { type ConnectionOptions, connectionOptions, withConnection } from './connect.js';
import { readSource, UsageError } from './input.js';
import { CliExit } from './options.js';
import { print, printJson } from './output.js';

interface OutputOptions {
  json?: boolean;
}

const DURATION = /^(\d+(?:\.\d+)?)(s|m|h|d)$/;
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `90s`, `30m`, `1h`, `2d` → milliseconds. */
export function parseDuration(s: string, what: string): number {
  const m = DURATION.exec(s.trim());
  if (!m) throw new UsageError(`${what}: not a duration such as 90s, 30m, 1h or 2d: ${s}`);
  const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  if (!(ms > 0)) throw new UsageError(`${what}: must be positive: ${s}`);
  return ms;
}

function trackingText(t: TrackResult): string {
  switch (t.status) {
    case 'sent':
      return 'sent';
    case 'failed':
      return `failed (${t.failureKind}): ${t.reason}`;
    case 'expired':
      return `expired: ${t.reason}`;
    case 'pending':
      return `pending (${t.lastSeen === 'created' ? 'created, not yet executed' : 'not yet visible to Scan'})`;
  }
}

function sendText(r: SendResult): string {
  const to = r.receiverName ? `${r.receiverName} (${r.receiver})` : r.receiver;
  return [
    `${r.amount} CC from ${r.sender} to ${to}`,
    `nonce ${r.nonce}, expires ${r.expiresAt}`,
    `transfer command ${r.transferCommandCid}${r.updateId ? `, update ${r.updateId}` : ''}`,
    `status: ${r.tracking ? trackingText(r.tracking) : 'created (not tracked: --no-wait)'}`,
  ].join('\n');
}

/** A prepare answer of the Ledger API or of the validator, as the pipeline's input. */
export function preparedFromJson(text: string): {
  preparedTransaction: string;
  claimedHash: string;
  scheme: HashingScheme;
} {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new UsageError('--prepared: not JSON');
  }
  const o = (typeof v === 'object' && v !== null ? v : {}) as Record<string, unknown>;
  const str = (k: string) => (typeof o[k] === 'string' ? (o[k] as string) : undefined);
  const ledgerTx = str('preparedTransaction');
  if (ledgerTx !== undefined) {
    const hash = str('preparedTransactionHash');
    if (hash === undefined) throw new UsageError('--prepared: preparedTransactionHash is missing');
    const name = str('hashingSchemeVersion') ?? 'HASHING_SCHEME_VERSION_V2';
    const scheme =
      name === 'HASHING_SCHEME_VERSION_V2' ? 'v2' : name === 'HASHING_SCHEME_VERSION_V3' ? 'v3' : undefined;
    if (!scheme) throw new UsageError(`--prepared: hashingSchemeVersion ${name} is not supported`);
    return { preparedTransaction: ledgerTx, claimedHash: hash, scheme };
  }
  const validatorTx = str('transaction');
  if (validatorTx !== undefined) {
    const hash = str('tx_hash');
    if (hash === undefined) throw new UsageError('--prepared: tx_hash is missing');
    return { preparedTransaction: validatorTx, claimedHash: hash, scheme: 'v2' };
  }
  throw new UsageError(
    '--prepared: expected {preparedTransaction, preparedTransactionHash, hashingSchemeVersion} or {transaction, tx_hash}',
  );
}

/** The intent document, validated; the error names the field. */
export function intentFromJson(text: string): unknown {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new UsageError('--intent: not JSON');
  }
  const r = IntentSchema.safeParse(v);
  if (!r.success) {
    const i = r.error.issues[0];
    const where = i && i.path.length > 0 ? `intent.${i.path.join('.')}` : 'intent';
    throw new UsageError(`--intent: ${where}: ${i?.message ?? 'invalid'}`);
  }
  return r.data;
}

export function registerFlows(program: Command): void {
  connectionOptions(
    program
      .command('setup-accept')
      .description("Accept the validator's setup proposal for PARTY (creates its TransferPreapproval)")
      .argument('<party>', 'external party id (in the party book, Ed25519 key)')
      .option('--proposal <cid>', 'the ExternalPartySetupProposal to accept (default: the one for PARTY)')
      .option('--json', 'print the result as JSON'),
  ).action(async (party: string, opts: ConnectionOptions & OutputOptions & { proposal?: string }) => {
    await partyArgs(opts.keystore, [[party, 'PARTY', { ansName: false }]]);
    const r = await withConnection(opts, { validator: true }, ({ ctx }) =>
      acceptSetupProposal(ctx, party, opts.proposal !== undefined ? { proposalCid: opts.proposal } : {}),
    );
    if (opts.json) return printJson(r);
    print(
      r.alreadyAccepted
        ? `${party} already has TransferPreapproval ${r.preapprovalCid}${r.provider ? ` from ${r.provider}` : ''}; nothing signed`
        : `TransferPreapproval ${r.preapprovalCid} for ${party}${r.provider ? ` from ${r.provider}` : ''}${r.updateId ? `, update ${r.updateId}` : ''}`,
    );
  });

  connectionOptions(
    program
      .command('send')
      .description("Send Canton Coin through the receiver's TransferPreapproval (validator prepare-send)")
      .requiredOption('--from <party>', 'sender (in the party book, Ed25519 key)')
      .requiredOption('--to <party>', 'receiver party id or ANS name')
      .requiredOption('--amount <decimal>', 'amount of CC, e.g. 12.5')
      .option('--expires-in <duration>', 'deadline for the SV automation, e.g. 30m, 1h (default 1h)')
      .option('--expires-at <iso>', 'deadline as an ISO-8601 time')
      .option('--description <text>', 'description carried by the transfer')
      .option('--no-wait', 'do not track the transfer command until it settles')
      .option('--wait-timeout <duration>', 'how long to track (default 60s)')
      .option('--json', 'print the result as JSON'),
  ).action(
    async (
      opts: ConnectionOptions &
        OutputOptions & {
          from: string;
          to: string;
          amount: string;
          expiresIn?: string;
          expiresAt?: string;
          description?: string;
          wait: boolean;
          waitTimeout?: string;
        },
    ) => {
      if (opts.expiresIn !== undefined && opts.expiresAt !== undefined)
        throw new UsageError('give --expires-in or --expires-at, not both');
      amountArg(opts.amount, '--amount');
      await partyArgs(opts.keystore, [
        [opts.from, '--from'],
        [opts.to, '--to'],
      ]);
      if (opts.expiresAt !== undefined) instantArg(opts.expiresAt, '--expires-at', { future: true });
      const inMs = opts.expiresIn !== undefined ? parseDuration(opts.expiresIn, '--expires-in') : undefined;
      const timeoutMs =
        opts.waitTimeout !== undefined ? parseDuration(opts.waitTimeout, '--wait-timeout') : undefined;
      const r = await withConnection(opts, { validator: true }, ({ ctx }) => {
        const now = ctx.nowUs ? Number(ctx.nowUs() / 1000n) : Date.now();
        const expiresAt = inMs !== undefined ? new Date(now + inMs) : opts.expiresAt;
        return sendViaPreapproval(
          ctx,
          {
            from: opts.from,
            to: opts.to,
            amount: opts.amount,
            ...(expiresAt !== undefined ? { expiresAt } : {}),
            ...(opts.description !== undefined ? { description: opts.description } : {}),
          },
          { wait: opts.wait, ...(timeoutMs !== undefined ? { timeoutMs } : {}) },
        );
      });
      if (opts.json) printJson(r);
      else print(sendText(r));
      const t = r.tracking;
      if (t && (t.status === 'failed' || t.status === 'expired'))
        throw new CliExit(
          1,
          `the transfer command ${t.status === 'expired' ? 'expired' : 'failed'}: ${t.reason}`,
        );
    },
  );

  connectionOptions(
    program
      .command('preapprovals')
      .description("The TransferPreapprovals of the party book's parties, their expiry and renewal")
      .option('--within-days <n>', 'report as expiring when fewer days remain', '30')
      .option('--json', 'print the result as JSON'),
  ).action(async (opts: ConnectionOptions & OutputOptions & { withinDays: string }) => {
    const withinDays = Number(opts.withinDays);
    if (!Number.isFinite(withinDays) || withinDays < 0)
      throw new UsageError(`--within-days: not a number of days: ${opts.withinDays}`);
    const r = await withConnection(opts, { validator: true }, ({ ctx }) =>
      watchPreapprovals(ctx, { withinDays }),
    );
    if (opts.json) return printJson(r);
    if (r.length === 0) return print('no parties in the party book');
    for (const p of r)
      print(
        p.status === 'missing'
          ? `${p.partyId}: missing (no TransferPreapproval)`
          : `${p.partyId}: ${p.status}, expires ${p.expiresAt ?? '?'} (${p.daysLeft ?? '?'} days), provider ${p.provider ?? '?'}${p.willRenew ? ', renewed by the validator' : ', not renewed by this validator'}`,
      );
  });

  connectionOptions(
    program
      .command('sign-and-execute')
      .description('Verify a prepared transaction against an explicit intent, sign it and execute it')
      .requiredOption('--party <party>', 'the signing party (in the party book)')
      .requiredOption('--intent <file>', 'intent JSON (IntentSchema); "-" for stdin')
      .requiredOption(
        '--prepared <file>',
        'prepare answer JSON: {preparedTransaction, preparedTransactionHash, hashingSchemeVersion} or {transaction, tx_hash}; "-" for stdin',
      )
      .option('--command-id <id>', 'refuse unless the transaction carries this command id')
      .option('--verify-only', 'run every check and sign nothing')
      .option('--json', 'print the result as JSON'),
  ).action(
    async (
      opts: ConnectionOptions &
        OutputOptions & {
          party: string;
          intent: string;
          prepared: string;
          commandId?: string;
          verifyOnly?: boolean;
        },
    ) => {
      if (opts.intent === '-' && opts.prepared === '-')
        throw new UsageError('--intent and --prepared cannot both be standard input');
      await partyArgs(opts.keystore, [[opts.party, '--party', { ansName: false }]]);
      if (opts.commandId !== undefined) commandIdArg(opts.commandId);
      const intent = intentFromJson((await readSource(opts.intent)).toString('utf8'));
      const prepared = preparedFromJson((await readSource(opts.prepared)).toString('utf8'));
      const req = {
        partyId: opts.party,
        ...prepared,
        intent,
        ...(opts.commandId !== undefined ? { commandId: opts.commandId } : {}),
      };
      if (opts.verifyOnly) {
        const r = await withConnection(opts, { ledger: false }, ({ ctx }) => verifyOnly(ctx, req));
        if (opts.json) return printJson({ verified: true, ...r });
        print(
          [
            `verified: ${r.partyId} may sign ${r.hash} (${r.scheme.toUpperCase()}), command ${r.commandId}`,
            ...r.actions.map((a) => `  ${a.kind} ${a.template}${a.choice ? ` ${a.choice}` : ''}`),
            `window closes ${r.window.latest} (${r.window.latestSource}); nothing was signed`,
          ].join('\n'),
        );
        return;
      }
      const r = await withConnection(opts, { ledger: true }, ({ ctx }) => signAndExecute(ctx, req));
      if (opts.json) return printJson(r);
      print(
        `executed: update ${r.result.updateId} (command ${r.result.commandId}, offset ${r.result.completionOffset}); signed ${r.hash}`,
      );
    },
  );
}
