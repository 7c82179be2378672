/**
 * The compiled `canton-signer` flow commands against an in-process sandbox
 * (timers off) with a file keystore and party book in a temp folder:
 * `setup-accept`, `send` (tracked to sent, balances moved), `preapprovals`,
 * `sign-and-execute --verify-only` (signs nothing: no journal `signed`
 * record, nothing on the ledger) and a full `sign-and-execute`; refusals exit
 * 1 with `canton-signer: refused (<reason>): …`, a malformed intent exits 2
 * naming the field. Needs `npm run build` (dist/) first.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import { ValidatorClient } from '../../src/canton/validator/client.js';
import { balanceOf } from '../../src/sandbox/amulet.js';
import { str } from '../../src/sandbox/ledger/value-json.js';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { type CliKeystore, cliEnv, cliKeystore, ROOT, runCli } from '../support/cli.js';
import { preapprovalProposal } from '../support/flow-env.js';

const PASS = 'cli-flows-passphrase';

let sb: RunningSandbox;
let ks: CliKeystore;
let dir: string;
let alice: string;
let bob: string;
let carol: string;

/** Runs the compiled CLI against the sandbox with the test keystore. */
const cli = (args: string[], input?: string) =>
  runCli([...args, '--sandbox', sb.urls.origin, '--keystore', dir, '--timeout', '10'], {
    env: cliEnv({ CANTON_SIGNER_PASSPHRASE: PASS }),
    ...(input === undefined ? {} : { input }),
  });

const journal = () =>
  existsSync(join(dir, 'journal.jsonl'))
    ? readFileSync(join(dir, 'journal.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { step: string; flow: string })
    : [];

const unlocked = (p: string) => balanceOf(sb.ctx.net.store, p, sb.ctx.net.latestRound().number).totalUnlocked;

beforeAll(async () => {
  expect(existsSync(join(ROOT, 'dist', 'cli', 'flows.js')), 'run `npm run build` first').toBe(true);
  sb = await startSandbox({ seed: 'cli-flows', timers: false });
  ks = await cliKeystore(sb, 'cli-flows', PASS);
  dir = ks.dir;
  alice = (await ks.addParty('alice', { fund: '100' })).partyId;
  bob = (await ks.addParty('bob')).partyId;
  carol = (await ks.addParty('carol')).partyId;
});

afterAll(async () => {
  await sb?.close();
  await ks?.close();
});

describe('canton-signer setup-accept / send / preapprovals', () => {
  it('setup-accept creates the preapproval; a second run signs nothing', async () => {
    const v = new ValidatorClient({ baseUrl: sb.urls.validator, retry: { attempts: 1 } });
    await v.createSetupProposal({ user_party_id: bob });
    const r = await cli(['setup-accept', bob, '--json']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { preapprovalCid: string; alreadyAccepted: boolean };
    expect(out.alreadyAccepted).toBe(false);
    expect(str(sb.ctx.net.store.get(out.preapprovalCid)!.argument, 'receiver')).toBe(bob);
    const again = await cli(['setup-accept', bob]);
    expect(again.status).toBe(0);
    expect(again.stdout).toMatch(/already has TransferPreapproval .*; nothing signed/);
    expect(journal().filter((j) => j.step === 'signed')).toHaveLength(1);
  });

  it('send is tracked to sent and moves the amount', async () => {
    const r = await cli([
      'send',
      '--from',
      alice,
      '--to',
      bob,
      '--amount',
      '12.5',
      '--expires-in',
      '30m',
      '--json',
    ]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { nonce: number; tracking: { status: string } };
    expect(out.nonce).toBe(0);
    expect(out.tracking.status).toBe('sent');
    expect(unlocked(alice)).toBe('87.5000000000');
    expect(unlocked(bob)).toBe('12.5000000000');
    const text = await cli(['send', '--from', alice, '--to', bob, '--amount', '1']);
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(/^1 CC from alice::.* to bob::.*\nnonce 1, expires .*\n.*\nstatus: sent\n$/);
  });

  it('send to a receiver without preapproval is refused (exit 1); bad options exit 2', async () => {
    const r = await cli(['send', '--from', alice, '--to', carol, '--amount', '1']);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      `canton-signer: refused (bad_request): the validator would not prepare the send: Receiver ${carol} does not have a TransferPreapproval\n`,
    );
    const u = await cli(['send', '--from', alice, '--to', bob, '--amount', '1', '--expires-in', 'soon']);
    expect(u.status).toBe(2);
    expect(u.stderr).toMatch(/--expires-in: not a duration/);
    const v = await cli(['send', '--from', alice, '--to', bob, '--amount', '1', '--validator-party', 'op']);
    expect(v.status).toBe(2);
    expect(v.stderr).toMatch(/--validator-party: not a party id/);
  });

  it('--validator-party pins the delegate of a send: another validator party is refused, nothing signed', async () => {
    const before = journal().length;
    const other = `other-validator::1220${'cd'.repeat(32)}`;
    const r = await cli(['send', '--from', alice, '--to', bob, '--amount', '1', '--validator-party', other]);
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/refused \((intent_mismatch|bad_request)\).*delegate/);
    expect(
      journal()
        .slice(before)
        .some((x) => x.step === 'signed'),
    ).toBe(false);
  });

  it('preapprovals lists each party with its status', async () => {
    const r = await cli(['preapprovals', '--json']);
    expect(r.status).toBe(0);
    const rows = JSON.parse(r.stdout) as { partyId: string; status: string; willRenew: boolean }[];
    const by = new Map(rows.map((x) => [x.partyId, x]));
    expect(by.get(bob)).toMatchObject({ status: 'ok', willRenew: true });
    expect(by.get(carol)).toMatchObject({ status: 'missing', willRenew: false });
    const soon = await cli(['preapprovals', '--within-days', '365', '--json']);
    const bobSoon = (JSON.parse(soon.stdout) as { partyId: string; status: string }[]).find(
      (x) => x.partyId === bob,
    );
    expect(bobSoon?.status).toBe('expiring');
  });
});

describe('canton-signer sign-and-execute', () => {
  const proposals = () =>
    sb.ctx.net.store
      .activeContracts('TransferPreapprovalProposal')
      .filter((c) => str(c.argument, 'receiver') === alice).length;

  async function preparedFile(): Promise<string> {
    const ledger = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, retry: { attempts: 1 } });
    const res = await ledger.prepare({
      userId: LEDGER_API_USER,
      commandId: randomUUID(),
      actAs: [alice],
      synchronizerId: sb.ctx.net.synchronizerId,
      commands: [preapprovalProposal(sb.ctx.net, alice, carol)],
    });
    const f = join(dir, `prepared-${randomUUID()}.json`);
    writeFileSync(f, JSON.stringify(res));
    return f;
  }

  const intentFile = (intent: unknown) => {
    const f = join(dir, `intent-${randomUUID()}.json`);
    writeFileSync(f, JSON.stringify(intent));
    return f;
  };

  it('--verify-only reports and signs nothing; a wrong intent is refused (exit 1)', async () => {
    const prepared = await preparedFile();
    const signedBefore = journal().filter((j) => j.step === 'signed').length;
    const good = intentFile({ kind: 'preapproval-proposal', receiver: alice, provider: carol });
    const r = await cli([
      'sign-and-execute',
      '--party',
      alice,
      '--intent',
      good,
      '--prepared',
      prepared,
      '--verify-only',
      '--json',
    ]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { verified: boolean; hash: string; actions: { kind: string }[] };
    expect(out.verified).toBe(true);
    expect(out.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(out.actions.map((a) => a.kind)).toEqual(['preapproval-proposal']);
    expect(journal().filter((j) => j.step === 'signed')).toHaveLength(signedBefore);
    expect(proposals()).toBe(0);

    const wrong = intentFile({ kind: 'preapproval-proposal', receiver: alice, provider: bob });
    const w = await cli([
      'sign-and-execute',
      '--party',
      alice,
      '--intent',
      wrong,
      '--prepared',
      prepared,
      '--verify-only',
    ]);
    expect(w.status).toBe(1);
    expect(w.stderr).toMatch(
      /^canton-signer: refused \(intent_mismatch\): the transaction does not do what was asked: /,
    );

    const bad = intentFile({ kind: 'preapproval-proposal', receiver: alice });
    const b = await cli([
      'sign-and-execute',
      '--party',
      alice,
      '--intent',
      bad,
      '--prepared',
      prepared,
      '--verify-only',
    ]);
    expect(b.status).toBe(2);
    expect(b.stderr).toMatch(/^canton-signer: --intent: intent\.provider: /);
    expect(journal().filter((j) => j.step === 'signed')).toHaveLength(signedBefore);
  });

  it('signs and executes with the intent from stdin', async () => {
    const prepared = await preparedFile();
    const r = await cli(
      ['sign-and-execute', '--party', alice, '--intent', '-', '--prepared', prepared, '--json'],
      JSON.stringify({ kind: 'preapproval-proposal', receiver: alice, provider: carol }),
    );
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { outcome: string; result: { updateId: string } };
    expect(out.outcome).toBe('committed');
    expect(out.result.updateId).toMatch(/^1220[0-9a-f]{64}$/);
    expect(proposals()).toBe(1);
    expect(journal().at(-1)).toMatchObject({ flow: 'sign-and-execute', step: 'committed' });
  });
});
