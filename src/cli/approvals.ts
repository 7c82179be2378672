/**
 * `canton-signer approvals list|show|approve|reject` and `canton-signer
 * approvers register|list|activate|revoke`: an approver's and an admin's
 * commands, as REST clients of a running service (never its database).
 *
 * Nothing is signed on the service's word: `approve` and `reject` recompute
 * the statement hash from the statement served and refuse when it differs
 * from the hash served, show the summary read from that statement (every
 * text made safe for the terminal), refuse a request that is not pending or
 * has expired, and only then sign the approval message with the approver's
 * Ed25519 key (file keystore or PKCS#11, through the signer). `approvers
 * register` sends the key's public key with a proof of possession.
 *
 * The service URL comes from --url or $CANTON_SIGNER_URL, the bearer token
 * from $CANTON_SIGNER_TOKEN only (a token on the command line is visible in
 * process lists). Exit codes: 0 done, 1 refused or failed (by the service,
 * the network, or a check here), 2 usage.
 */
import { type Command, Option } from 'commander';
import { SCHEMES } from '../keys/schemes.js';
import type { KeyDescription, Signer } from '../keys/signer.js';
import { printable } from '../offline/printable.js';
import type { ApprovalDecision, ApprovalStatement, CredentialKind } from '../policy/approval.js';
import type { PolicyAction, Requirement } from '../policy/evaluate.js';
import type { ServiceClient } from './air-gap.js';
import { UsageError } from './input.js';
import { CliExit, keystoreFolder } from './options.js';
import { print, printJson } from './output.js';
import { DEFAULT_TIMEOUT_S, DEFAULT_URL, TOKEN_ENV, URL_ENV } from './service-env.js';

// What the commands do is loaded when one runs: the help needs neither the HTTP client, the keystore nor
// the approval signatures' Ed25519 code.
const approvalCrypto = () => import('../policy/approval.js');

/** What GET /v1/approvals/{id} serves. */
export interface ApprovalView {
  id: string;
  subject: string;
  status: string;
  statement: ApprovalStatement;
  statementHash: string;
  requirement: Requirement;
  approvals: {
    approver: string;
    decision: ApprovalDecision;
    credentialId?: string;
    reason?: string;
    at: string;
  }[];
  missing: { group: string; need: number }[];
  expiresAt: string;
  createdAt: string;
  summary?: string[];
  result?: unknown;
}

/** What /v1/approvers/credentials serves. */
export interface CredentialView {
  id: string;
  approver: string;
  kind: CredentialKind;
  publicKey: string;
  label?: string | null;
  status: string;
  createdAt: string;
  activatedBy?: string | null;
  activatedAt?: string | null;
}

interface ServiceOpts {
  url?: string;
  timeout?: string;
}

interface KeyOpts {
  key?: string;
  keystore?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const REQUEST_STATUSES = ['pending', 'approved', 'rejected', 'expired', 'superseded', 'cancelled'] as const;
const CREDENTIAL_STATUSES = ['pending', 'active', 'revoked'] as const;

function checkId(what: string, id: string): string {
  if (!UUID.test(id)) throw new UsageError(`${what}: not an id (a UUID): ${id}`);
  return id;
}

/** The service client, once a token is there: every approvals endpoint needs one. */
async function service(opts: ServiceOpts, who: string): Promise<ServiceClient> {
  // checked first: without a token every request would only be refused
  if (!process.env[TOKEN_ENV]?.trim())
    throw new CliExit(
      2,
      `no bearer token: set $${TOKEN_ENV} to ${who} token from your identity provider (a token is never taken from the command line)`,
    );
  const { clientFrom } = await import('./air-gap.js');
  return clientFrom({
    ...(opts.url !== undefined ? { url: opts.url } : {}),
    ...(opts.timeout !== undefined ? { timeout: opts.timeout } : {}),
  });
}

function serviceOptions(c: Command): Command {
  return c
    .addOption(
      new Option('--url <url>', `the canton-signer service (default $${URL_ENV}, else ${DEFAULT_URL})`),
    )
    .addOption(new Option('--timeout <seconds>', `per request (default ${DEFAULT_TIMEOUT_S})`));
}

const keystoreOption = () =>
  new Option('--keystore <dir>', 'keystore folder (default $CANTON_SIGNER_KEYSTORE or ./keystore)');

// ---- keys ------------------------------------------------------------------------------------

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Opens the signer, finds the approver key (Ed25519 only, not a cold key), runs `fn`, closes. */
async function withApproverKey<T>(
  opts: KeyOpts & { key: string },
  fn: (signer: Signer, key: KeyDescription) => Promise<T>,
): Promise<T> {
  const { openSigner } = await import('../keys/config.js');
  const signer = await openSigner({ keystore: keystoreFolder(opts.keystore), interactive: true });
  try {
    const key = await signer.describe(opts.key);
    if (key.scheme !== 'ed25519')
      throw new CliExit(
        2,
        `--key ${opts.key} is an ${SCHEMES[key.scheme].title} key: approvals are signed with Ed25519 keys only. Create one (canton-signer keys create --label ${opts.key}-approver --scheme ed25519) and register it (canton-signer approvers register --key ${opts.key}-approver)`,
      );
    if (key.backend === 'offline')
      throw new CliExit(
        2,
        `--key ${opts.key} is a cold key (its private key is on an offline machine): approvals are signed with a key of the file keystore or the HSM`,
      );
    if (key.disabled)
      throw new CliExit(
        1,
        `--key ${opts.key} is disabled: enable it (canton-signer keys enable) or use another key`,
      );
    return await fn(signer, key);
  } finally {
    await signer.close();
  }
}

/** The key's base64 Ed25519 signature of the 32-byte `message`, checked before it leaves. */
async function signWith(signer: Signer, key: KeyDescription, message: Uint8Array): Promise<string> {
  const out = await signer.sign(key.label, message);
  const signature = Buffer.from(out.bytes).toString('base64');
  const { verifyApproval } = await approvalCrypto();
  if (!verifyApproval({ kind: 'ed25519', publicKey: hex(key.publicKeyRaw) }, message, signature))
    throw new CliExit(
      1,
      `key ${key.label} made a signature that does not verify with its own public key: nothing sent; check the key (canton-signer keys show ${key.label}) or its HSM`,
    );
  return signature;
}

// ---- requests --------------------------------------------------------------------------------

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Whether `v` is an action whose fields, when present, are what the summary reads. */
function isAction(v: unknown): v is PolicyAction {
  if (!isObject(v)) return false;
  for (const k of ['kind', 'sender', 'receiver', 'amount', 'memo'])
    if (v[k] !== undefined && typeof v[k] !== 'string') return false;
  const i = v.instrument;
  return i === undefined || (isObject(i) && typeof i.admin === 'string' && typeof i.id === 'string');
}

/** Whether `v` has the fields of a version-1 statement the summary reads. */
function isStatement(v: unknown): v is ApprovalStatement {
  if (!isObject(v) || v.v !== 1) return false;
  for (const k of ['request', 'subject', 'party', 'entryPoint', 'requester', 'expiresAt'])
    if (typeof v[k] !== 'string') return false;
  const p = v.policy;
  if (
    !isObject(p) ||
    typeof p.version !== 'number' ||
    typeof p.sha256 !== 'string' ||
    typeof p.rule !== 'string'
  )
    return false;
  if (!Array.isArray(v.actions) || !v.actions.every(isAction)) return false;
  return (
    Array.isArray(v.requirement) &&
    v.requirement.every((r) => isObject(r) && typeof r.group === 'string' && typeof r.count === 'number')
  );
}

/**
 * GET the request and check what can be checked here: it is the request
 * asked for, its statement is one this command reads, and the statement
 * hashes to the hash served (which is what gets signed).
 */
async function fetchRequest(client: ServiceClient, id: string): Promise<ApprovalView> {
  const view = await client.call<ApprovalView>('GET', `/v1/approvals/${id}`);
  const refuse = (why: string) =>
    new CliExit(
      1,
      `the service at ${client.shown} served approval request ${id} ${why}: refused, nothing signed. Do not approve it from this service's answer; tell the service's administrator`,
    );
  if (!isObject(view) || !isStatement(view.statement) || typeof view.statementHash !== 'string')
    throw refuse(
      isObject(view) && isObject(view.statement) && view.statement.v !== 1
        ? `with a statement of version ${printable(String(view.statement.v))}, which this canton-signer does not know (upgrade it)`
        : 'without a readable approval statement',
    );
  if (view.statement.request !== id)
    throw refuse(`with the statement of another request (${printable(view.statement.request)})`);
  const { statementHash } = await approvalCrypto();
  const computed = statementHash(view.statement);
  if (computed !== view.statementHash)
    throw refuse(
      `with statement hash ${printable(view.statementHash)}, but its statement hashes to ${computed}: the statement shown is not the one the hash names`,
    );
  return view;
}

const requirementText = (req: readonly { group: string; count?: number; need?: number }[]) =>
  req.length === 0 ? 'none' : req.map((r) => `${r.count ?? r.need} of ${printable(r.group)}`).join(' and ');

function instrumentText(i: PolicyAction['instrument']): string {
  if (!i) return '';
  return ` ${printable(i.id)} (admin ${printable(i.admin)})`;
}

/** One line per action, read from the (hash-checked) statement. */
function actionText(a: PolicyAction): string {
  const kind = printable(a.kind ?? 'action');
  const flow =
    a.sender !== undefined || a.receiver !== undefined
      ? ` ${printable(a.sender ?? '?')} → ${printable(a.receiver ?? '?')}`
      : '';
  const amount =
    a.amount !== undefined
      ? `, ${printable(a.amount)}${instrumentText(a.instrument)}`
      : instrumentText(a.instrument);
  const memo = a.memo !== undefined ? `, memo "${printable(a.memo)}"` : '';
  return `${kind}${flow}${amount}${memo}`;
}

/** The first action in a few words, for a table row. */
function shortSummary(s: ApprovalStatement): string {
  const first = s.actions[0];
  const text = first ? actionText(first) : 'no actions';
  return s.actions.length > 1 ? `${text} (+${s.actions.length - 1} more)` : text;
}

function expiryText(iso: string, now: number): string {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return `${printable(iso)} (not a time)`;
  if (t <= now) return `${printable(iso)} (expired)`;
  const mins = Math.floor((t - now) / 60_000);
  const h = Math.floor(mins / 60);
  return `${printable(iso)} (in ${h > 0 ? `${h} h ${mins % 60} min` : `${Math.max(1, mins)} min`})`;
}

/** The service's count of approvals still missing, its well-formed entries only. */
function missingOf(view: unknown): { group: string; need: number }[] {
  const m = isObject(view) && Array.isArray(view.missing) ? view.missing : [];
  return m.filter(
    (x): x is { group: string; need: number } =>
      isObject(x) && typeof x.group === 'string' && typeof x.need === 'number',
  );
}

/** The readable summary of a request: from its statement, which the hash binds, then the service's state. */
export function summaryLines(view: ApprovalView, now = Date.now()): string[] {
  const s = view.statement;
  const lines = [
    `approval request ${printable(String(view.id))} (${printable(String(view.status))})`,
    `  party:       ${printable(s.party)}`,
    `  entry point: ${printable(s.entryPoint)}`,
    ...(s.entryPoint === 'policy-change'
      ? [
          `  change:      bring policy version ${s.policy.version} into force (sha256 ${printable(s.policy.sha256)})`,
          `               read it first: GET /v1/policy/versions/${s.policy.version} (its sha256 must be the one above)`,
        ]
      : s.actions.length === 0
        ? ['  actions:     none']
        : s.actions.map(
            (a, i) => `  ${s.actions.length > 1 ? `action ${i + 1}:   ` : 'action:      '}${actionText(a)}`,
          )),
    `  requester:   ${printable(s.requester)}`,
    `  policy:      version ${s.policy.version} (sha256 ${printable(s.policy.sha256)}), rule ${printable(s.policy.rule)}`,
    `  requires:    ${requirementText(s.requirement)}`,
  ];
  const approvals = (Array.isArray(view.approvals) ? view.approvals : []).filter(isObject);
  if (approvals.length > 0)
    lines.push(
      `  decided:     ${approvals.map((a) => `${printable(String(a.approver))} ${a.decision === 'reject' ? `rejected${typeof a.reason === 'string' ? ` (${printable(a.reason)})` : ''}` : 'approved'}`).join(', ')}`,
    );
  const missing = missingOf(view);
  if (missing.length > 0 && view.status === 'pending')
    lines.push(`  missing:     ${requirementText(missing)}`);
  lines.push(`  expires:     ${expiryText(s.expiresAt, now)}`, `  statement:   ${view.statementHash}`);
  return lines;
}

/** Refuses (exit 1) a request that can no longer be decided. */
function checkDecidable(view: ApprovalView, now = Date.now()): void {
  if (view.status !== 'pending')
    throw new CliExit(
      1,
      `approval request ${view.statement.request} is ${printable(String(view.status))}, not pending: there is nothing to decide`,
    );
  const t = Date.parse(view.statement.expiresAt);
  if (!Number.isFinite(t) || t <= now)
    throw new CliExit(
      1,
      `approval request ${view.statement.request} expired at ${printable(view.statement.expiresAt)}: nothing signed; the requester submits again for a new request`,
    );
}

/** The approver's active credential for this key: given with --credential, else looked up by public key. */
async function credentialFor(
  client: ServiceClient,
  key: KeyDescription,
  given: string | undefined,
): Promise<string> {
  if (given !== undefined) return given;
  const publicKey = hex(key.publicKeyRaw);
  const r = await client.call<{ items: CredentialView[] }>('GET', '/v1/approvers/credentials');
  const mine = (Array.isArray(r.items) ? r.items : []).filter(
    (c) =>
      isObject(c) &&
      c.kind === 'ed25519' &&
      typeof c.publicKey === 'string' &&
      c.publicKey.toLowerCase() === publicKey,
  );
  const active = mine.find((c) => c.status === 'active');
  if (active && typeof active.id === 'string') return active.id;
  const pending = mine.find((c) => c.status === 'pending');
  if (pending)
    throw new CliExit(
      1,
      `the credential of key ${key.label} (${printable(String(pending.id))}) is pending: an admin activates it (canton-signer approvers activate ${printable(String(pending.id))}), then approve again`,
    );
  throw new CliExit(
    1,
    mine.length > 0
      ? `the credential of key ${key.label} was revoked: register a new key (canton-signer approvers register --key LABEL) and have an admin activate it`
      : `key ${key.label} is not registered as your approver credential at ${client.shown}: register it (canton-signer approvers register --key ${key.label}) and have an admin activate it, or give --credential ID`,
  );
}

interface DecideOpts extends ServiceOpts, KeyOpts {
  credential?: string;
  reason?: string;
  json?: boolean;
}

async function decide(id: string, decision: ApprovalDecision, opts: DecideOpts): Promise<void> {
  checkId('the request id', id);
  if (opts.credential !== undefined) checkId('--credential', opts.credential);
  if (decision === 'reject' && !opts.reason?.trim())
    throw new UsageError('--reason: say why the request is rejected');
  if (decision === 'approve' && opts.key === undefined)
    throw new UsageError('--key: name the Ed25519 key of your approver credential (canton-signer keys list)');
  if (opts.key === undefined && opts.credential !== undefined)
    throw new UsageError('--credential is for a signed decision: give --key too');
  const client = await service(opts, 'an approver’s');
  const run = async (signer?: Signer, key?: KeyDescription) => {
    const view = await fetchRequest(client, id);
    if (!opts.json) print(summaryLines(view).join('\n'));
    checkDecidable(view);
    const body: Record<string, string> = { statementHash: view.statementHash };
    if (decision === 'reject') body.reason = opts.reason as string;
    if (signer && key) {
      body.credentialId = await credentialFor(client, key, opts.credential);
      body.signature = await signWith(
        signer,
        key,
        (await approvalCrypto()).approvalMessage(view.statementHash, decision),
      );
    }
    const after = await client.call<ApprovalView>('POST', `/v1/approvals/${id}/${decision}`, {
      body: JSON.stringify(body),
    });
    if (opts.json) {
      printJson({
        decision,
        statementHash: view.statementHash,
        signed: body.signature !== undefined,
        request: after,
      });
      return;
    }
    const status = isObject(after) && typeof after.status === 'string' ? after.status : 'unknown';
    const missing = missingOf(after);
    print(
      `${decision === 'approve' ? 'approved' : 'rejected'}${body.signature ? ' (signed)' : ''}: request ${id} is now ${printable(status)}${status === 'pending' && missing.length > 0 ? `, still missing ${requirementText(missing)}` : ''}`,
    );
  };
  if (opts.key === undefined) return run();
  return withApproverKey({ ...opts, key: opts.key }, run);
}

// ---- credentials -----------------------------------------------------------------------------

function credentialLine(c: CredentialView): string {
  return `credential ${printable(c.id)}: ${printable(String(c.status))}, approver ${printable(String(c.approver))}, ${printable(String(c.kind))} key ${printable(String(c.publicKey))}${c.label ? ` (${printable(c.label)})` : ''}${c.activatedBy ? `, activated by ${printable(c.activatedBy)}` : ''}`;
}

function table(rows: string[][]): string {
  const widths = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function registerApprovals(program: Command): void {
  const approvals = program
    .command('approvals')
    .description('Approval requests the policy opened: list, show, approve or reject (a running service)');

  serviceOptions(
    approvals
      .command('list')
      .description('List approval requests (default: the pending ones)')
      .addOption(
        new Option('--status <status>', 'only these')
          .choices([...REQUEST_STATUSES, 'all'])
          .default('pending'),
      )
      .option('--json', 'print {items: [...]} as JSON'),
  ).action(async (opts: ServiceOpts & { status: string; json?: boolean }) => {
    const client = await service(opts, 'an approver’s or admin’s');
    const r = await client.call<{ items: ApprovalView[] }>('GET', '/v1/approvals', {
      query: { status: opts.status === 'all' ? undefined : opts.status },
    });
    const items = Array.isArray(r.items) ? r.items : [];
    if (opts.json) return printJson({ items });
    if (items.length === 0)
      return print(opts.status === 'all' ? 'no approval requests' : `no ${opts.status} approval requests`);
    const rows = items.map((v) => [
      printable(String(v.id)),
      printable(String(v.status)),
      isStatement(v.statement) ? printable(v.statement.party) : '?',
      isStatement(v.statement)
        ? shortSummary(v.statement)
        : printable(Array.isArray(v.summary) ? String(v.summary[0] ?? '') : ''),
      printable(String(isStatement(v.statement) ? v.statement.expiresAt : v.expiresAt)),
    ]);
    print(table([['ID', 'STATUS', 'PARTY', 'SUMMARY', 'EXPIRES'], ...rows]));
  });

  serviceOptions(
    approvals
      .command('show')
      .description('Show one approval request, its statement checked against its hash')
      .argument('<id>', 'the approval request')
      .option('--json', 'print the request as JSON'),
  ).action(async (id: string, opts: ServiceOpts & { json?: boolean }) => {
    checkId('the request id', id);
    const view = await fetchRequest(await service(opts, 'an approver’s or admin’s'), id);
    if (opts.json) return printJson(view);
    print(summaryLines(view).join('\n'));
  });

  serviceOptions(
    approvals
      .command('approve')
      .description('Approve a pending request: checks its statement, shows it, signs it with your key')
      .argument('<id>', 'the approval request')
      .requiredOption('--key <label>', 'the Ed25519 key of your approver credential')
      .addOption(keystoreOption())
      .option('--credential <id>', 'your credential (default: the active one of --key)')
      .option('--json', 'print the outcome as JSON'),
  ).action(async (id: string, opts: DecideOpts) => decide(id, 'approve', opts));

  serviceOptions(
    approvals
      .command('reject')
      .description('Reject a pending request, signed when --key is given')
      .argument('<id>', 'the approval request')
      .requiredOption('--reason <text>', 'why (recorded and shown to the requester)')
      .option('--key <label>', 'sign the rejection with the Ed25519 key of your approver credential')
      .addOption(keystoreOption())
      .option('--credential <id>', 'your credential (default: the active one of --key)')
      .option('--json', 'print the outcome as JSON'),
  ).action(async (id: string, opts: DecideOpts) => decide(id, 'reject', opts));

  const approvers = program
    .command('approvers')
    .description('Approver credentials: register your key, list them; an admin activates or revokes');

  serviceOptions(
    approvers
      .command('register')
      .description(
        'Register an Ed25519 key as your approver credential (pending until an admin activates it)',
      )
      .requiredOption('--key <label>', 'the Ed25519 key (canton-signer keys create --scheme ed25519)')
      .addOption(keystoreOption())
      .option('--label <text>', 'a name for the credential, e.g. the device')
      .option('--json', 'print the credential as JSON'),
  ).action(async (opts: ServiceOpts & KeyOpts & { key: string; label?: string; json?: boolean }) => {
    const client = await service(opts, 'an approver’s');
    await withApproverKey(opts, async (signer, key) => {
      const credential = { kind: 'ed25519' as const, publicKey: hex(key.publicKeyRaw) };
      const proof = await signWith(signer, key, (await approvalCrypto()).registrationMessage(credential));
      const c = await client.call<CredentialView>('POST', '/v1/approvers/credentials', {
        body: JSON.stringify({
          ...credential,
          ...(opts.label !== undefined ? { label: opts.label } : {}),
          proof,
        }),
      });
      if (opts.json) return printJson(c);
      print(credentialLine(c));
      if (c.status === 'pending')
        print(`an admin activates it: canton-signer approvers activate ${printable(c.id)}`);
    });
  });

  serviceOptions(
    approvers
      .command('list')
      .description('List approver credentials (an admin sees all, an approver its own)')
      .addOption(new Option('--status <status>', 'only these').choices([...CREDENTIAL_STATUSES]))
      .option('--json', 'print {items: [...]} as JSON'),
  ).action(async (opts: ServiceOpts & { status?: string; json?: boolean }) => {
    const client = await service(opts, 'an approver’s or admin’s');
    const r = await client.call<{ items: CredentialView[] }>('GET', '/v1/approvers/credentials');
    const items = (Array.isArray(r.items) ? r.items : []).filter(
      (c) => opts.status === undefined || c.status === opts.status,
    );
    if (opts.json) return printJson({ items });
    if (items.length === 0) return print('no approver credentials');
    const rows = items.map((c) => [
      printable(String(c.id)),
      printable(String(c.status)),
      printable(String(c.approver)),
      printable(String(c.kind)),
      printable(String(c.publicKey)),
      printable(c.label ?? '-'),
      printable(String(c.createdAt)),
    ]);
    print(table([['ID', 'STATUS', 'APPROVER', 'KIND', 'PUBLIC KEY', 'LABEL', 'CREATED'], ...rows]));
  });

  for (const [verb, description] of [
    [
      'activate',
      'Activate a pending credential (admin): the service seals it; check its public key with the approver first',
    ],
    ['revoke', 'Revoke a credential (admin): it no longer counts for approvals'],
  ] as const)
    serviceOptions(
      approvers
        .command(verb)
        .description(description)
        .argument('<id>', 'the credential')
        .option('--json', 'print the credential as JSON'),
    ).action(async (id: string, opts: ServiceOpts & { json?: boolean }) => {
      checkId('the credential id', id);
      const c = await (await service(opts, 'an admin’s')).call<CredentialView>(
        'POST',
        `/v1/approvers/credentials/${id}/${verb}`,
      );
      if (opts.json) return printJson(c);
      print(credentialLine(c));
    });
}
