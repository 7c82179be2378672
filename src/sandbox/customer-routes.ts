/**
 * The customer controls (`/sandbox/customer/*`): deposits from parties outside
 * the book (one, or a batch of up to 1,000), a customer's answer to an offer a
 * party sent it, a customer allocated ahead of use, and the test-only
 * transfer-out switch that moves a party's holdings without its signature.
 * Request checking and answer shapes only; what happens is ./customers.ts.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { balanceOf } from './amulet.js';
import type { SandboxContext } from './context.js';
import {
  answerOffer,
  type CustomerDeposit,
  checkDeposit,
  customerDeposit,
  DEFAULT_CUSTOMER,
  type DepositOutcome,
  ensureCustomer,
  transferOut,
} from './customers.js';
import { SandboxError } from './errors.js';
import { parseIsoMicros } from './ledger/clock.js';
import { preapprovalOf } from './validator/routes.js';

const config = { config: { service: 'sandbox' } };

/** The most deposits one batch request carries. */
export const MAX_BATCH = 1000;

const Amount = z
  .string()
  .regex(/^\d{1,28}(\.\d{1,10})?$/, 'must be a positive decimal string with up to 10 decimals, e.g. "12.5"')
  .refine((s) => /[1-9]/.test(s), 'must be more than 0');
const Party = z.string().min(1).max(255);
const Name = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a customer name: 1-64 letters, digits, - and _');
const Mode = z.enum(['one-step', 'two-step', 'auto']);
const Memo = z.string().max(4096);
const Instrument = z.strictObject({ admin: z.string().optional(), id: z.string() });
const Iso = z.string().refine((s) => parseIsoMicros(s) !== undefined, 'must be an ISO-8601 time with a zone');

const DepositSchema = z.strictObject({
  to: Party,
  amount: Amount,
  memo: Memo.optional(),
  mode: Mode.default('auto'),
  customer: Name.default(DEFAULT_CUSTOMER),
  instrument: Instrument.optional(),
  executeBefore: Iso.optional(),
});
const BatchSchema = z.strictObject({ deposits: z.array(DepositSchema).min(1).max(MAX_BATCH) });
const TransferOutSchema = z.strictObject({
  from: Party,
  to: Party.optional(),
  amount: Amount.optional(),
  holdingCid: z.string().min(1).optional(),
  memo: Memo.optional(),
  mode: Mode.default('auto'),
});
const RespondSchema = z.strictObject({
  action: z.enum(['accept', 'reject']),
  instructionCid: z.string().min(1).optional(),
  customer: Name.optional(),
  from: Party.optional(),
});
const AllocateSchema = z.strictObject({
  name: Name.default(DEFAULT_CUSTOMER),
  preapproval: z.boolean().optional(),
});

/** A 400 naming the bad field, in the `{error}` shape of the other controls. */
function parse<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  const r = schema.safeParse(body ?? {});
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const at = issue.path.length > 0 ? issue.path.map(String).join('.') : 'body';
  throw new SandboxError(400, { error: `${at}: ${issue.message}` });
}

type DepositBody = z.output<typeof DepositSchema>;

export function registerCustomerRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;

  /** The deposit as ./customers.ts takes it; refuses an instrument the sandbox does not have. */
  const depositOf = (d: DepositBody, at: string): CustomerDeposit => {
    if (d.instrument && (d.instrument.id !== 'Amulet' || (d.instrument.admin ?? net.dso) !== net.dso))
      throw new SandboxError(400, {
        error: `${at}instrument: the sandbox has one instrument, Canton Coin ({"admin": "${net.dso}", "id": "Amulet"})`,
      });
    return {
      to: d.to,
      amount: d.amount,
      memo: d.memo,
      mode: d.mode,
      customer: d.customer,
      executeBefore: d.executeBefore === undefined ? undefined : parseIsoMicros(d.executeBefore),
    };
  };

  app.post('/sandbox/customer/deposit', config, async (req) => {
    const raw = req.body;
    if (typeof raw === 'object' && raw !== null && 'deposits' in raw) {
      const { deposits } = parse(BatchSchema, raw);
      const specs = deposits.map((d, i) => depositOf(d, `deposits.${i}.`));
      // Everything that can be refused is refused before the first deposit commits.
      for (const [i, d] of specs.entries()) checkDeposit(net, d, `deposits.${i}.to`);
      const started = performance.now();
      const done: DepositOutcome[] = [];
      for (const [i, d] of specs.entries()) {
        try {
          done.push(customerDeposit(net, d));
        } catch (e) {
          const why = e instanceof Error ? e.message : String(e);
          const status = e instanceof SandboxError ? e.status : 500;
          throw new SandboxError(status, {
            error: `deposits.${i}: ${why} (the ${i} deposits before it were committed, up to offset ${done.at(-1)?.offset ?? 'none'})`,
          });
        }
      }
      return { deposits: done, elapsedMs: Math.round(performance.now() - started) };
    }
    return customerDeposit(net, depositOf(parse(DepositSchema, raw), ''));
  });

  app.post('/sandbox/customer/transfer-out', config, async (req) =>
    transferOut(net, parse(TransferOutSchema, req.body)),
  );

  app.post('/sandbox/customer/respond', config, async (req) =>
    answerOffer(net, parse(RespondSchema, req.body)),
  );

  app.post('/sandbox/customer/allocate', config, async (req) => {
    const body = parse(AllocateSchema, req.body);
    const { party, created } = ensureCustomer(net, body.name, { preapproval: body.preapproval === true });
    return {
      name: body.name,
      party,
      created,
      preapproval: preapprovalOf(net, party)?.contractId ?? null,
      balance: balanceOf(net.store, party, net.latestRound().number).totalUnlocked,
    };
  });
}
