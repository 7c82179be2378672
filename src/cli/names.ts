/**
 * `canton-signer names quote|register|list|renew|auto-renew|cancel`: the names of
 * the book's parties (docs/names.md), as REST clients of a running service —
 * the service signs (through the one pipeline) and its keeper follows the
 * registration and pays the renewals. The URL comes from --url or
 * $CANTON_SIGNER_URL, the bearer token (operator; an auditor may list and
 * quote) from $CANTON_SIGNER_TOKEN only. Exit codes: 0 done, 1 refused or
 * failed, 2 usage.
 */
import { type Command, Option } from 'commander';
import { CliExit } from './options.js';
import { out } from './output.js';
import { DEFAULT_TIMEOUT_S, DEFAULT_URL, TOKEN_ENV, URL_ENV } from './service-env.js';

interface ServiceOpts {
  url?: string;
  timeout?: string;
  json?: boolean;
}

/** The service's answers (types only: nothing of the flows is loaded). */
type NameView = import('../flows/names-keeper.js').NameView;
type Quote = import('../flows/names-register.js').NameQuote;

async function service(opts: ServiceOpts) {
  if (!process.env[TOKEN_ENV]?.trim())
    throw new CliExit(
      2,
      `no bearer token: set $${TOKEN_ENV} to an operator's token (a token is never taken from the command line)`,
    );
  const { clientFrom } = await import('./air-gap.js');
  return clientFrom({
    ...(opts.url !== undefined ? { url: opts.url } : {}),
    ...(opts.timeout !== undefined ? { timeout: opts.timeout } : {}),
  });
}

function withService(c: Command): Command {
  return c
    .addOption(
      new Option('--url <url>', `the canton-signer service (default $${URL_ENV}, else ${DEFAULT_URL})`),
    )
    .addOption(new Option('--timeout <seconds>', `per request (default ${DEFAULT_TIMEOUT_S})`))
    .option('--json', 'print the answer as JSON');
}

const partyPath = (party: string, rest = '') => `/v1/parties/${encodeURIComponent(party)}/names${rest}`;

/** One registration in a few lines: the name and its party, state, expiry, next payment. */
export function nameText(n: NameView): string {
  const lines = [`${n.name}  ${n.state}  (party ${n.partyId})`];
  if (n.expiresAt) lines.push(`  expires   ${n.expiresAt}`);
  if (n.nextPaymentDueAt)
    lines.push(
      `  renewal   ${n.autoRenew ? 'automatic' : 'manual (auto-renew off)'}; window opens ${n.renewalWindowOpensAt}, due ${n.nextPaymentDueAt}`,
    );
  lines.push(
    `  paid      ${n.paidCc} CC so far (${n.renewals} renewal${n.renewals === 1 ? '' : 's'}; fee ${n.entryFeeUsd} USD per lifetime)`,
  );
  if (n.waiting?.for === 'signature')
    lines.push(`  waiting   for the offline signature of export ${n.waiting.exportId}`);
  if (n.waiting?.for === 'approval') lines.push(`  waiting   for approvals: request ${n.waiting.approvalId}`);
  if (n.error) lines.push(`  last try  ${n.error}`);
  return `${lines.join('\n')}\n`;
}

function quoteText(q: Quote): string {
  const lines = [
    `${q.name}: ${q.available ? 'available' : 'cannot be registered'}`,
    ...q.problems.map((p) => `  - ${p}`),
    `  fee ${q.feeUsd} USD = ${q.feeCc} CC at ${q.amuletPrice} USD/CC (round ${q.round}), for ${q.lifetimeDays} days; renewal payable ${q.renewalWindowDays} days before expiry`,
    `  the party needs ${q.maxCc} CC free: a payment may lock that much, transfer fees included`,
  ];
  return `${lines.join('\n')}\n`;
}

export function registerNames(program: Command): void {
  const names = program
    .command('names')
    .description("Names of the signer's parties in the name service: register, list, renew, auto-renew");

  withService(
    names
      .command('quote')
      .description('Whether a name can be registered, and what it costs now')
      .argument('<name>', 'e.g. alice.unverified.cns'),
  ).action(async (name: string, opts: ServiceOpts) => {
    const q = await (await service(opts)).call<Quote>('GET', '/v1/names/quote', { query: { name } });
    out(opts.json, q, quoteText(q));
    if (!q.available) throw new CliExit(1, `${name} cannot be registered`);
  });

  withService(
    names
      .command('register')
      .description(
        'Register a name for a party: request the entry and pay its first lifetime (signed by the service)',
      )
      .argument('<party>', 'a party of the book')
      .argument('<name>', 'e.g. alice.unverified.cns (lower case)')
      .option('--entry-url <url>', 'the entry’s URL (http or https, at most 255 characters)', '')
      .option('--description <text>', 'the entry’s description (at most 140 characters)', '')
      .option('--no-auto-renew', 'do not pay renewals automatically'),
  ).action(
    async (
      party: string,
      name: string,
      opts: ServiceOpts & { description: string; autoRenew: boolean; entryUrl: string },
    ) => {
      // --url names the service, as for every command that talks to it; the entry's URL is --entry-url.
      const r = await (await service(opts)).call<{ name: NameView; quote: Quote; warnings?: string[] }>(
        'POST',
        partyPath(party),
        {
          body: JSON.stringify({
            name,
            url: opts.entryUrl,
            description: opts.description,
            autoRenew: opts.autoRenew,
          }),
        },
      );
      const n = r.name;
      const next =
        n.state === 'active'
          ? 'the DSO collected the payment: the entry exists'
          : n.waiting
            ? 'it goes on once that is done'
            : n.state === 'paid'
              ? 'the entry is made when the DSO collects the payment'
              : `not paid yet; tried again every few minutes — fund the party, or give it up with \`canton-signer names cancel ${party} ${name}\``;
      out(
        opts.json,
        r,
        `${nameText(n)}  priced ${r.quote.feeCc} CC (${r.quote.feeUsd} USD at ${r.quote.amuletPrice} USD/CC): ${next}\n${(r.warnings ?? []).map((w) => `  warning: ${w}\n`).join('')}`,
      );
      // Recorded but nothing paid, and not waiting for someone: the command did not do what it was asked.
      if ((n.state === 'requesting' || n.state === 'requested') && !n.waiting)
        throw new CliExit(1, `${name} is recorded but not paid: ${n.error ?? 'see names list'}`);
    },
  );

  withService(
    names
      .command('list')
      .description('The registrations of a party, newest first')
      .argument('<party>', 'a party of the book'),
  ).action(async (party: string, opts: ServiceOpts) => {
    const r = await (await service(opts)).call<{ names: NameView[] }>('GET', partyPath(party));
    out(opts.json, r, r.names.length ? r.names.map(nameText).join('') : `${party} has no names\n`);
  });

  withService(
    names
      .command('renew')
      .description('Pay the next renewal now (its window must be open)')
      .argument('<party>')
      .argument('<name>'),
  ).action(async (party: string, name: string, opts: ServiceOpts) => {
    const n = await (await service(opts)).call<NameView>(
      'POST',
      partyPath(party, `/${encodeURIComponent(name)}/renew`),
      { body: '{}' },
    );
    out(opts.json, n, nameText(n));
  });

  withService(
    names
      .command('cancel')
      .description('Give up a registration nothing was paid for yet (e.g. the party lacks funds)')
      .argument('<party>')
      .argument('<name>'),
  ).action(async (party: string, name: string, opts: ServiceOpts) => {
    const n = await (await service(opts)).call<NameView>(
      'DELETE',
      partyPath(party, `/${encodeURIComponent(name)}`),
    );
    out(opts.json, n, nameText(n));
  });

  withService(
    names
      .command('auto-renew')
      .description('Turn the automatic renewal of a name on or off')
      .argument('<party>')
      .argument('<name>')
      .argument('<on|off>'),
  ).action(async (party: string, name: string, onOff: string, opts: ServiceOpts) => {
    if (onOff !== 'on' && onOff !== 'off') throw new CliExit(2, `auto-renew: on or off, got ${onOff}`);
    const n = await (await service(opts)).call<NameView>(
      'PUT',
      partyPath(party, `/${encodeURIComponent(name)}/auto-renew`),
      { body: JSON.stringify({ enabled: onOff === 'on' }) },
    );
    out(opts.json, n, nameText(n));
  });
}
