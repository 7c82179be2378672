/**
 * The `exchange` section of the service's configuration (docs/configuration.md):
 * ledger ingestion, deposit attribution rules, auto-accept rules for incoming
 * offers and sweep rules, each schema with the checks between its own fields.
 * Part of the one configuration schema in src/server/config.ts.
 */
import { z } from 'zod';
import { ruleProblem } from '../exchange/deposits.js';

export const attributionRuleSchema = z
  .strictObject({
    /** Named in each deposit's `attribution` (`rule:<name>`). */
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a name: 1-64 letters, digits, ".", "_" or "-"'),
    /** A party id of the book, or `*` (default): every party. */
    party: z.string().min(1).optional(),
    /** exact: the memo is the account; prefix: the memo after `value`; regex: `account` from the groups. */
    match: z.enum(['exact', 'prefix', 'regex']),
    value: z.string().min(1).max(500).optional(),
    account: z.string().min(1).max(200).optional(),
  })
  .superRefine((r, ctx) => {
    const problem = ruleProblem(r);
    if (problem) ctx.addIssue({ code: 'custom', path: [], message: `rule ${r.name}: ${problem}` });
  });

const RULE_NAME = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a name: 1-64 letters, digits, ".", "_" or "-"');
/** A non-negative decimal with at most 10 decimals (token-standard amounts). */
const DECIMAL = z
  .string()
  .regex(/^[0-9]{1,28}(\.[0-9]{1,10})?$/, 'a decimal string, at most 10 decimals (e.g. "1000.5")');
const instrumentSchema = z.strictObject({ admin: z.string().min(1), id: z.string().min(1) });

/** Scaled to 10 decimals, for comparisons in the schema. */
function units(d: string): bigint {
  const [i = '0', f = ''] = d.split('.');
  return BigInt(i) * 10n ** 10n + BigInt(f.padEnd(10, '0'));
}

export const autoAcceptRuleSchema = z.strictObject({
  /** Named in each decision (`rule`) and its event. */
  name: RULE_NAME,
  /** The receiving party of the book, or `*`: every party. */
  party: z.string().min(1),
  /** Senders the rule covers (party ids or `*`); absent: any sender. */
  senders: z.array(z.string().min(1)).min(1).optional(),
  /** Instruments the rule covers; absent: any. */
  instruments: z.array(instrumentSchema).min(1).optional(),
  /** Only offers whose memo named a customer account (attributed deposits). */
  requireAccount: z.boolean().default(true),
  /** Only offers of at most this amount. */
  maxAmount: DECIMAL.optional(),
  action: z.enum(['accept', 'reject']),
});

export type AutoAcceptRule = z.output<typeof autoAcceptRuleSchema>;

export const sweepRuleSchema = z
  .strictObject({
    name: RULE_NAME,
    /** The party of the book swept from (its key signs the transfer). */
    from: z.string().min(1),
    /** The receiving party: it needs a transfer preapproval (a one-step transfer). */
    to: z.string().min(1),
    /** Default: Canton Coin of the network. */
    instrument: instrumentSchema.optional(),
    /** Above this available balance, a sweep runs … */
    maxBalance: DECIMAL,
    /** … and leaves this much behind. */
    minBalance: DECIMAL,
  })
  .superRefine((r, ctx) => {
    const decimal = /^[0-9]{1,28}(\.[0-9]{1,10})?$/;
    // A malformed amount is reported by its own field's check.
    if (
      decimal.test(r.minBalance) &&
      decimal.test(r.maxBalance) &&
      units(r.minBalance) >= units(r.maxBalance)
    )
      ctx.addIssue({
        code: 'custom',
        path: ['minBalance'],
        message: `sweep ${r.name}: minBalance (${r.minBalance}) must be below maxBalance (${r.maxBalance})`,
      });
    if (r.from === r.to)
      ctx.addIssue({
        code: 'custom',
        path: ['to'],
        message: `sweep ${r.name}: from and to are the same party`,
      });
  });

export type SweepRule = z.output<typeof sweepRuleSchema>;

export const exchangeSchema = z
  .strictObject({
    ingestion: z
      .strictObject({
        /** Follow the book's parties on the Ledger API update stream (deposits, deliveries, alerts). */
        enabled: z.boolean().default(true),
        /** How often the ledger end is looked at when nothing was new (ms). */
        pollMs: z.number().int().min(20).max(600_000).default(500),
        /** Updates read per request, and written per database transaction. */
        pageSize: z.number().int().min(1).max(10_000).default(200),
        /** The ingestion lease (s): another instance takes over this long after the holder died. */
        leaseSeconds: z.number().int().min(2).max(3600).default(15),
      })
      .prefault({}),
    deposits: z
      .strictObject({
        /** Memo → customer account rules, first match wins; none: the deposit is unattributed. */
        attribution: z.array(attributionRuleSchema).default([]),
        /** A longer memo is stored cut and attributes to nothing. */
        maxMemoLength: z.number().int().min(1).max(4096).default(256),
      })
      .prefault({}),
    /** Answers to incoming transfer offers by rule: first matching rule wins, else `otherwise`. */
    autoAccept: z
      .strictObject({
        rules: z.array(autoAcceptRuleSchema).default([]),
        /** No rule matched: leave the offer to an operator (wait) or send it back (reject). */
        otherwise: z.enum(['wait', 'reject']).default('wait'),
      })
      .superRefine((a, ctx) => {
        const seen = new Set<string>();
        for (const r of a.rules) {
          if (seen.has(r.name))
            ctx.addIssue({ code: 'custom', path: ['rules'], message: `rule name ${r.name} is used twice` });
          seen.add(r.name);
        }
      })
      .prefault({}),
    /** Treasury sweeps: a party's surplus above maxBalance moved down to minBalance. */
    sweeps: z
      .array(sweepRuleSchema)
      .default([])
      .superRefine((rs, ctx) => {
        const from = new Set<string>();
        for (const r of rs) {
          if (from.has(r.from))
            ctx.addIssue({ code: 'custom', path: [], message: `two sweeps from ${r.from}: one per party` });
          from.add(r.from);
        }
      }),
    /** How often sweeps and waiting offers are looked at apart from ingestion pages (ms). */
    automationPollMs: z.number().int().min(20).max(3_600_000).default(2000),
  })
  .prefault({});

export type ExchangeConfig = z.output<typeof exchangeSchema>;
