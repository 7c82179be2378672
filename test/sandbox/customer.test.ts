/**
 * The sandbox's customers (`/sandbox/customer/*`): deposits from parties
 * outside the book reach the receiver's update stream as real token-standard
 * transfers (tx-kind `transfer`, the memo as reason, Holding and
 * TransferInstruction views), one-step through a preapproval and two-step as
 * an offer; a batch of 200 in one call; the test-only transfer-out moving a
 * party's holding without its signature; a customer accepting and rejecting
 * an offer a party sent it; and `canton-signer sandbox deposit` against a
 * running sandbox (--url, and the note `npm start` leaves).
 */

import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { balanceOf, transferPreapprovalContract } from '../../src/sandbox/amulet.js';
import type { SandboxNetwork } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { BIN, buildDist, cliEnv, runCli } from '../support/cli.js';
import { freePort } from '../support/ports.js';
import { addExternalParty, type TestParty } from '../support/sandbox-party.js';

// biome-ignore lint/suspicious/noExplicitAny: plain JSON navigation over the answers
type Json = Record<string, any>;

const HOLDING_IFACE = '#splice-api-token-holding-v1:Splice.Api.Token.HoldingV1:Holding';
const INSTRUCTION_IFACE =
  '#splice-api-token-transfer-instruction-v1:Splice.Api.Token.TransferInstructionV1:TransferInstruction';
const TX_KIND = 'splice.lfdecentralizedtrust.org/tx-kind';
const REASON = 'splice.lfdecentralizedtrust.org/reason';
const SENDER = 'splice.lfdecentralizedtrust.org/sender';

let sb: RunningSandbox;
let net: SandboxNetwork;
let alice: TestParty; // has a TransferPreapproval
let bob: TestParty; // has none

beforeAll(async () => {
  sb = await startSandbox({ seed: 'customer-test', timers: false });
  net = sb.ctx.net;
  alice = addExternalParty(net, 'alice');
  bob = addExternalParty(net, 'bob');
  net.commitInternal({
    archives: [],
    creates: [transferPreapprovalContract(net.dso, alice.id, net.validatorParty, net.clock.now())],
    commandId: 'test-preapproval',
  });
});

afterAll(async () => {
  await sb?.close();
});

async function post(path: string, body: unknown): Promise<{ status: number; body: Json }> {
  const r = await fetch(`${sb.urls.origin}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as Json };
}

const ifaceFilter = (party: string) => ({
  filtersByParty: {
    [party]: {
      cumulative: [
        { identifierFilter: { WildcardFilter: { value: { includeCreatedEventBlob: false } } } },
        {
          identifierFilter: {
            InterfaceFilter: { value: { interfaceId: HOLDING_IFACE, includeInterfaceView: true } },
          },
        },
        {
          identifierFilter: {
            InterfaceFilter: { value: { interfaceId: INSTRUCTION_IFACE, includeInterfaceView: true } },
          },
        },
      ],
    },
  },
  verbose: false,
});

/** The transaction at `offset` as `party` sees it in ledger effects, through `/v2/updates`. */
async function txFor(party: string, offset: number): Promise<Json> {
  const r = await post('/v2/updates?stream_idle_timeout_ms=10', {
    beginExclusive: offset - 1,
    endInclusive: offset,
    updateFormat: {
      includeTransactions: {
        eventFormat: ifaceFilter(party),
        transactionShape: 'TRANSACTION_SHAPE_LEDGER_EFFECTS',
      },
    },
  });
  expect(r.status).toBe(200);
  const txs = (r.body as unknown as Json[])
    .filter((i) => i.update?.Transaction)
    .map((i) => i.update.Transaction.value);
  expect(txs).toHaveLength(1);
  return txs[0]!;
}

const exercises = (tx: Json): Json[] =>
  tx.events.flatMap((e: Json) => (e.ExercisedEvent ? [e.ExercisedEvent] : []));
const creates = (tx: Json): Json[] =>
  tx.events.flatMap((e: Json) => (e.CreatedEvent ? [e.CreatedEvent] : []));
/** The exercise results' token-standard meta values (results with `meta` directly or wrapped in an Optional). */
const metas = (tx: Json): Record<string, string>[] =>
  exercises(tx).flatMap((x) => {
    const m = x.exerciseResult?.meta;
    return m?.values ? [m.values as Record<string, string>] : [];
  });

describe('POST /sandbox/customer/deposit', () => {
  it('one step through the preapproval: the receiver sees a transfer with the memo, sender the customer, and its new Holding', async () => {
    const r = await post('/sandbox/customer/deposit', { to: alice.id, amount: '12.5', memo: 'acct-42' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.mode).toBe('one-step');
    expect(r.body.customer).toBe(`customer::${net.participantId.split('::')[1]}`);
    expect(r.body.receiver).toBe(alice.id);
    expect(r.body.instructionCid).toBeUndefined();
    const tx = await txFor(alice.id, r.body.offset);
    expect(tx.updateId).toBe(r.body.updateId);
    const transfer = metas(tx).find((m) => m[TX_KIND] === 'transfer' && m[REASON] === 'acct-42');
    expect(transfer, JSON.stringify(metas(tx))).toBeDefined();
    expect(transfer![SENDER]).toBe(r.body.customer);
    // The receiver witnesses the send through its preapproval (not the sender's factory call above it).
    expect(exercises(tx).map((x) => x.choice)).toContain('TransferPreapproval_Send');
    const views = creates(tx).flatMap((c) => c.interfaceViews.map((v: Json) => v.viewValue));
    const received = views.filter((v) => v.owner === alice.id);
    expect(received.map((v) => [v.amount, v.instrumentId.id, v.lock])).toEqual([
      ['12.5000000000', 'Amulet', null],
    ]);
  });

  it('two step: an offer (TransferInstruction) with the memo, visible to the receiver; one-step without a preapproval is refused', async () => {
    const r = await post('/sandbox/customer/deposit', {
      to: 'bob',
      amount: '3',
      memo: 'acct-77',
      customer: 'carol',
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.mode).toBe('two-step');
    expect(r.body.receiver).toBe(bob.id);
    expect(r.body.instructionCid).toMatch(/^00[0-9a-f]+$/);
    const tx = await txFor(bob.id, r.body.offset);
    const instr = creates(tx).find((c) => c.contractId === r.body.instructionCid);
    expect(instr, 'the receiver sees the offer').toBeDefined();
    const view = instr!.interfaceViews[0].viewValue;
    expect([view.transfer.sender, view.transfer.receiver, view.transfer.amount]).toEqual([
      r.body.customer,
      bob.id,
      '3.0000000000',
    ]);
    expect(view.transfer.meta.values[REASON]).toBe('acct-77');
    // Two-step to alice although she has a preapproval, when asked.
    const forced = await post('/sandbox/customer/deposit', { to: alice.id, amount: '1', mode: 'two-step' });
    expect([forced.status, forced.body.mode]).toEqual([200, 'two-step']);
    const refused = await post('/sandbox/customer/deposit', { to: bob.id, amount: '1', mode: 'one-step' });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatch(/no TransferPreapproval/);
  });

  it('refuses what it cannot do, naming the field', async () => {
    const cases: [unknown, number, RegExp][] = [
      [{ to: 'nobody', amount: '1' }, 404, /^to: no party with the hint nobody/],
      [{ to: alice.id, amount: '0' }, 400, /^amount: must be more than 0/],
      [{ to: alice.id, amount: '1,5' }, 400, /^amount: /],
      [
        { to: alice.id, amount: '1', instrument: { id: 'USDC' } },
        400,
        /^instrument: the sandbox has one instrument/,
      ],
      [{ to: alice.id, amount: '1', customer: 'mallory' }, 400, /built-in party/],
      [
        {
          deposits: [
            { to: alice.id, amount: '1' },
            { to: 'nobody', amount: '1' },
          ],
        },
        404,
        /^deposits\.1\.to: /,
      ],
      [{ deposits: Array.from({ length: 1001 }, () => ({ to: alice.id, amount: '1' })) }, 400, /^deposits: /],
    ];
    const before = net.store.ledgerEnd();
    for (const [body, status, error] of cases) {
      const r = await post('/sandbox/customer/deposit', body);
      expect([r.status, r.body.error], JSON.stringify(body).slice(0, 80)).toEqual([
        status,
        expect.stringMatching(error),
      ]);
    }
    expect(net.store.ledgerEnd(), 'nothing committed').toBe(before);
  });

  it('a batch of 200 in one call: one transfer each, in order, the customer topped up as needed', async () => {
    const deposits = Array.from({ length: 200 }, (_, i) => ({
      to: i % 2 === 0 ? alice.id : bob.id,
      amount: '600000',
      memo: `acct-${i}`,
      customer: 'whale',
    }));
    const t0 = performance.now();
    const r = await post('/sandbox/customer/deposit', { deposits });
    const ms = performance.now() - t0;
    console.log(
      `customer.test: 200 deposits in one call took ${ms.toFixed(0)} ms (sandbox: ${r.body.elapsedMs} ms)`,
    );
    expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(200);
    const out = r.body.deposits as Json[];
    expect(out).toHaveLength(200);
    expect(out.map((d) => d.memo)).toEqual(deposits.map((d) => d.memo));
    expect(out.map((d) => d.mode)).toEqual(deposits.map((_, i) => (i % 2 === 0 ? 'one-step' : 'two-step')));
    const offsets = out.map((d) => d.offset as number);
    expect([...offsets].sort((a, b) => a - b)).toEqual(offsets);
    expect(new Set(out.map((d) => d.updateId)).size).toBe(200);
    // 200 × 600,000 is far more than the first funding: top-ups happened, and every deposit went through.
    const instructions = net.store
      .activeContracts('AmuletTransferInstruction')
      .filter((c) => out.some((d) => d.instructionCid === c.contractId));
    expect(instructions).toHaveLength(100);
  });
});

describe('POST /sandbox/customer/transfer-out (test-only)', () => {
  it('moves a holding of a book party to another owner without its signature, as a transfer', async () => {
    const dave = addExternalParty(net, 'dave');
    const tapped = net.tap(dave.id, '40');
    const r = await post('/sandbox/customer/transfer-out', { from: dave.id, memo: 'stolen' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.mode).toBe('one-step');
    expect(r.body.sender).toBe(dave.id);
    expect(r.body.receiver).toMatch(/^intruder::/);
    expect(r.body.amount).toBe('40.0000000000');
    expect(net.store.get(tapped.contractId), 'the holding was archived').toBeUndefined();
    const round = net.latestRound().number;
    expect(balanceOf(net.store, dave.id, round).totalHoldings).toBe('0.0000000000');
    const tx = await txFor(dave.id, r.body.offset);
    const m = metas(tx).find((x) => x[TX_KIND] === 'transfer');
    expect([m?.[SENDER], m?.[REASON]]).toEqual([dave.id, 'stolen']);
    const archived = exercises(tx).filter((x) => x.consuming && x.contractId === tapped.contractId);
    expect(archived).toHaveLength(1);
    // The whole holding moved: no change amulet (not even one of 0) is created for dave.
    const owners = creates(tx).map((c) => c.createArgument.owner ?? c.createArgument.amulet?.owner);
    expect(owners).not.toContain(dave.id);
    // The intruder holds it now.
    const intruder = await post('/sandbox/customer/allocate', { name: 'intruder' });
    expect([intruder.body.party, intruder.body.created]).toEqual([r.body.receiver, false]);
    expect(intruder.body.preapproval).toMatch(/^00/);
  });

  it('two step when the receiver has no preapproval: the whole holding is locked in the offer, no change', async () => {
    const gina = addExternalParty(net, 'gina');
    net.tap(gina.id, '8');
    expect((await post('/sandbox/customer/allocate', { name: 'customer' })).status).toBe(200);
    const r = await post('/sandbox/customer/transfer-out', { from: gina.id, to: 'customer' });
    expect([r.status, r.body.mode, r.body.amount]).toEqual([200, 'two-step', '8.0000000000']);
    const b = balanceOf(net.store, gina.id, net.latestRound().number);
    expect([b.totalUnlocked, b.totalLocked]).toEqual(['0.0000000000', '8.0000000000']);
    const tx = await txFor(gina.id, r.body.offset);
    const root = exercises(tx)[0]!;
    expect(root.choice).toBe('TransferFactory_Transfer');
    expect(root.exerciseResult.senderChangeCids).toEqual([]);
    expect(root.exerciseResult.output.value.transferInstructionCid).toBe(r.body.instructionCid);
    // The node ids line up without the change node: the instruction is the root's last child.
    const instr = creates(tx).find((c) => c.contractId === r.body.instructionCid)!;
    expect(instr.nodeId).toBe(root.lastDescendantNodeId);
  });

  it('a part of the holdings, to a given party; refuses more than the party holds', async () => {
    const erin = addExternalParty(net, 'erin');
    net.tap(erin.id, '10');
    const r = await post('/sandbox/customer/transfer-out', { from: erin.id, to: alice.id, amount: '4' });
    expect([r.status, r.body.mode, r.body.receiver]).toEqual([200, 'one-step', alice.id]);
    expect(balanceOf(net.store, erin.id, net.latestRound().number).totalUnlocked).toBe('6.0000000000');
    const tooMuch = await post('/sandbox/customer/transfer-out', { from: erin.id, amount: '7' });
    expect([tooMuch.status, tooMuch.body.error]).toEqual([
      400,
      expect.stringMatching(/holds 6\.0+ unlocked/),
    ]);
  });
});

describe('POST /sandbox/customer/respond', () => {
  it('a customer accepts and rejects offers a party sent it', async () => {
    const frank = addExternalParty(net, 'frank');
    net.tap(frank.id, '100');
    expect((await post('/sandbox/customer/allocate', {})).body.name).toBe('customer');
    // frank's offers to the customer (no preapproval): two-step, made here without the signer.
    const o1 = await post('/sandbox/customer/transfer-out', { from: frank.id, to: 'customer', amount: '30' });
    const o2 = await post('/sandbox/customer/transfer-out', { from: frank.id, to: 'customer', amount: '20' });
    expect([o1.body.mode, o2.body.mode]).toEqual(['two-step', 'two-step']);
    const round = () => net.latestRound().number;
    expect(balanceOf(net.store, frank.id, round()).totalLocked).toBe('50.0000000000');

    const accepted = await post('/sandbox/customer/respond', {
      instructionCid: o1.body.instructionCid,
      action: 'accept',
    });
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(200);
    expect([accepted.body.action, accepted.body.sender, accepted.body.amount]).toEqual([
      'accept',
      frank.id,
      '30.0000000000',
    ]);
    const acceptTx = await txFor(frank.id, accepted.body.offset);
    expect(exercises(acceptTx)[0]!.choice).toBe('TransferInstruction_Accept');

    // Without the cid: the oldest pending offer to the customer from frank.
    const rejected = await post('/sandbox/customer/respond', {
      customer: 'customer',
      from: frank.id,
      action: 'reject',
    });
    expect([rejected.status, rejected.body.instructionCid]).toEqual([200, o2.body.instructionCid]);
    const b = balanceOf(net.store, frank.id, round());
    expect([b.totalLocked, b.totalUnlocked]).toEqual(['0.0000000000', '70.0000000000']);
    const none = await post('/sandbox/customer/respond', { from: frank.id, action: 'accept' });
    expect([none.status, none.body.error]).toEqual([404, expect.stringMatching(/no pending transfer offer/)]);
  });
});

/** A port nothing listens on (just freed). */
describe('canton-signer sandbox deposit', () => {
  beforeAll(() => buildDist(['cli/sandbox-customer.js', 'server/dev-sandbox-note.js']), 180_000);

  it('sends a deposit to a hint, says what happened in one line, or JSON with --json', async () => {
    const text = await runCli([
      'sandbox',
      'deposit',
      '--to',
      'alice',
      '--amount',
      '10',
      '--memo',
      'acct-9',
      '--url',
      sb.urls.origin,
    ]);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toMatch(
      new RegExp(
        `^deposited 10 CC from customer::\\S+ to ${alice.id} \\(one-step, memo acct-9\\): update \\S+ at offset \\d+\\n$`,
      ),
    );
    const json = await runCli([
      'sandbox',
      'deposit',
      '--to',
      bob.id,
      '--amount',
      '2.5',
      '--two-step',
      '--json',
      '--url',
      sb.urls.origin,
    ]);
    expect(json.status, json.stderr).toBe(0);
    const a = JSON.parse(json.stdout) as Json;
    expect([a.mode, a.receiver, a.amount]).toEqual(['two-step', bob.id, '2.5']);
    expect(net.store.get(a.instructionCid)?.templateId.entityName).toBe('AmuletTransferInstruction');
    const bad = await runCli([
      'sandbox',
      'deposit',
      '--to',
      'nobody',
      '--amount',
      '1',
      '--url',
      sb.urls.origin,
    ]);
    expect([bad.status, bad.stderr]).toEqual([
      2,
      expect.stringMatching(/^canton-signer: deposit refused by the sandbox: to: no party/),
    ]);
    const port = await freePort();
    const env = cliEnv({
      CANTON_SIGNER_SANDBOX_PORT: String(port),
      CANTON_SIGNER_DATA_DIR: join(tmpdir(), 'no-such-dev-data'),
    });
    const down = await runCli(['sandbox', 'deposit', '--to', 'alice', '--amount', '1'], { env });
    expect([down.status, down.stderr]).toEqual([
      1,
      expect.stringContaining(
        `cannot reach the sandbox at http://127.0.0.1:${port} (the default): ECONNREFUSED`,
      ),
    ]);
  });

  it('sandbox respond: the customer accepts an offer from a party, or says there is none', async () => {
    const hank = addExternalParty(net, 'hank');
    net.tap(hank.id, '9');
    await post('/sandbox/customer/allocate', { name: 'customer' });
    const offer = await post('/sandbox/customer/transfer-out', {
      from: hank.id,
      to: 'customer',
      amount: '4',
    });
    expect(offer.body.mode).toBe('two-step');
    const r = await runCli(['sandbox', 'respond', '--accept', '--from', 'hank', '--url', sb.urls.origin]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe(
      `customer::${net.participantId.split('::')[1]} accepted 4.0000000000 CC from ${hank.id} (TransferInstruction ${offer.body.instructionCid}): update ${net.store.updateByOffset(net.store.ledgerEnd())!.updateId} at offset ${net.store.ledgerEnd()}\n`,
    );
    expect(net.store.get(offer.body.instructionCid)).toBeUndefined();
    const again = await runCli([
      'sandbox',
      'respond',
      '--reject',
      '--from',
      hank.id,
      '--url',
      sb.urls.origin,
    ]);
    expect([again.status, again.stderr]).toEqual([
      2,
      expect.stringMatching(/reject refused by the sandbox: no pending transfer offer/),
    ]);
    const neither = await runCli(['sandbox', 'respond', '--url', sb.urls.origin]);
    expect([neither.status, neither.stderr]).toEqual([
      2,
      expect.stringContaining('give one of --accept and --reject'),
    ]);
  });

  it('without --url: the sandbox npm start noted in ./dev/data while it runs', async () => {
    const cwd = await mkdtemp(join(tmpdir(), 'canton-signer-customer-'));
    try {
      await mkdir(join(cwd, 'dev', 'data'), { recursive: true });
      // This test process stands in for npm start: the note names a live process.
      const note = { format: 'canton-signer/dev-sandbox@1', url: sb.urls.origin, pid: process.pid };
      await writeFile(join(cwd, 'dev', 'data', 'dev-sandbox.json'), JSON.stringify(note));
      const run = (): Promise<{ status: number | null; stdout: string; stderr: string }> =>
        new Promise((resolve) => {
          const child = spawn(
            process.execPath,
            [BIN, 'sandbox', 'deposit', '--to', 'alice', '--amount', '25', '--memo', 'acct-1001'],
            {
              cwd,
              env: cliEnv(),
            },
          );
          let stdout = '';
          let stderr = '';
          child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
          child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
          child.on('close', (status) => resolve({ status, stdout, stderr }));
        });
      const r = await run();
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toMatch(
        /^deposited 25 CC from customer::\S+ to alice::\S+ \(one-step, memo acct-1001\)/,
      );
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  });
});
