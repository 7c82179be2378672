/**
 * `canton-signer sandbox deposit`: a customer outside the book sends a party
 * a deposit on a running sandbox (`POST /sandbox/customer/deposit`), one step
 * through the receiver's TransferPreapproval when it has one, else as a
 * two-step transfer offer. Where the sandbox is: --url, else
 * CANTON_SIGNER_SANDBOX_URL, else the one `npm start` noted in its data
 * folder (./dev/data, or CANTON_SIGNER_DATA_DIR) while it runs, else
 * http://127.0.0.1:7575 (CANTON_SIGNER_SANDBOX_PORT), where `canton-signer
 * sandbox` listens by default. Prints one line, or the answer with --json.
 */
import type { Command } from 'commander';
import { UsageError } from './input.js';
import { CliExit } from './options.js';
import { out } from './output.js';

interface DepositCliOptions {
  to: string;
  amount: string;
  memo?: string;
  twoStep?: boolean;
  oneStep?: boolean;
  customer?: string;
  url?: string;
  json?: boolean;
}

interface DepositAnswer {
  updateId: string;
  offset: number;
  mode: 'one-step' | 'two-step';
  customer: string;
  receiver: string;
  amount: string;
  memo?: string;
  instructionCid?: string;
}

/** Where the sandbox is and why the command looks there (for the error when it does not answer). */
export async function sandboxOrigin(
  explicit: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ url: string; from: string }> {
  if (explicit !== undefined) return { url: explicit, from: '--url' };
  const fromEnv = env.CANTON_SIGNER_SANDBOX_URL;
  if (fromEnv) return { url: fromEnv, from: 'CANTON_SIGNER_SANDBOX_URL' };
  const { readDevSandboxNote } = await import('../server/dev-sandbox-note.js');
  const { DEV_DATA_DIR } = await import('../server/dev.js');
  const note = readDevSandboxNote(env.CANTON_SIGNER_DATA_DIR || DEV_DATA_DIR);
  if (note) return { url: note.url, from: `${note.file}, noted by npm start` };
  const port = env.CANTON_SIGNER_SANDBOX_PORT || '7575';
  return { url: `http://127.0.0.1:${port}`, from: 'the default' };
}

export function registerSandboxCustomer(sandbox: Command): void {
  sandbox
    .command('deposit')
    .description('A customer outside the book sends a party a deposit on a running sandbox')
    .requiredOption('--to <party>', 'receiver: a party id, or the hint of one party on the sandbox (alice)')
    .requiredOption('--amount <amount>', 'Canton Coin amount, e.g. 25')
    .option('--memo <text>', 'the memo (the transfer reason), e.g. an account reference')
    .option('--two-step', 'send a transfer offer the receiver accepts, even if it has a preapproval')
    .option('--one-step', 'only through the receiver’s TransferPreapproval (refused without one)')
    .option('--customer <name>', 'which customer sends it', 'customer')
    .option('--url <origin>', 'the sandbox (default: the one npm start runs, else http://127.0.0.1:7575)')
    .option('--json', 'print the answer as JSON')
    .action(async (_opts: DepositCliOptions, cmd: Command) => {
      // `--json` is also an option of `sandbox` itself, which commander gives it first.
      const opts = cmd.optsWithGlobals<DepositCliOptions>();
      const { amountArg } = await import('./args.js');
      const amount = amountArg(opts.amount, '--amount');
      if (opts.twoStep && opts.oneStep) throw new UsageError('--one-step and --two-step: give one of them');
      if (opts.url !== undefined && !/^https?:\/\/[^/]+\/?$/.test(opts.url))
        throw new UsageError(
          `--url: expected the sandbox's origin, e.g. http://127.0.0.1:7575; got ${opts.url}`,
        );
      const { url, from } = await sandboxOrigin(opts.url);
      const body = {
        to: opts.to,
        amount,
        mode: opts.twoStep ? 'two-step' : opts.oneStep ? 'one-step' : 'auto',
        ...(opts.customer !== undefined ? { customer: opts.customer } : {}),
        ...(opts.memo !== undefined ? { memo: opts.memo } : {}),
      };
      const origin = url.replace(/\/$/, '');
      let res: Response;
      try {
        res = await fetch(`${origin}/sandbox/customer/deposit`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(30_000),
        });
      } catch (e) {
        const c = (e as { cause?: { code?: string; message?: string } }).cause;
        const cause = c?.code ?? c?.message ?? (e as Error).message;
        throw new CliExit(
          1,
          `cannot reach the sandbox at ${origin} (${from}): ${cause}: start it (npm start, or npx canton-signer sandbox), or give --url`,
        );
      }
      const text = await res.text();
      let answer: unknown;
      try {
        answer = JSON.parse(text);
      } catch {
        answer = undefined;
      }
      if (!res.ok) {
        const a = answer as { error?: string; cause?: string; code?: string } | undefined;
        const why = a?.error ?? (a?.code ? `${a.code}: ${a.cause}` : text.slice(0, 300));
        throw new CliExit(res.status < 500 ? 2 : 1, `deposit refused by the sandbox: ${why}`);
      }
      out(opts.json, answer, `${depositLine(answer as DepositAnswer)}\n`);
    });
}

/** One line saying what happened. */
export function depositLine(a: DepositAnswer): string {
  const memo = a.memo === undefined ? 'no memo' : `memo ${a.memo}`;
  const what =
    a.mode === 'one-step'
      ? `deposited ${a.amount} CC from ${a.customer} to ${a.receiver} (one-step, ${memo})`
      : `offered ${a.amount} CC from ${a.customer} to ${a.receiver} (two-step, ${memo}; TransferInstruction ${a.instructionCid} awaits the receiver's accept)`;
  return `${what}: update ${a.updateId} at offset ${a.offset}`;
}
