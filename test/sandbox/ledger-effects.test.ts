/**
 * The sandbox's ledger-effects transactions carry what a participant's do (DA's exchange samples
 * show it): interface views on every created event a witness's filter asks views of — a contract
 * created and archived in the same transaction, another party's holding the reader only
 * witnesses, what the network's automation creates — and, on exercises, `implementedInterfaces`:
 * the exercised contract's interfaces that the filter asks views of (none without such a filter).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsTransaction } from '../../src/canton/ledger-api/schemas.js';
import { HOLDING_INTERFACE } from '../../src/sandbox/amulet.js';
import { step } from '../../src/sandbox/automation.js';
import { identifierString } from '../../src/sandbox/ledger/value-json.js';
import { ID } from '../../src/sandbox/prepared/common.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { addExternalParty, type TestParty } from '../support/sandbox-party.js';
import { HOLDING_IFACE, INSTRUCTION_IFACE, tokenKit } from '../support/sandbox-token.js';

let sb: RunningSandbox;
let kit: ReturnType<typeof tokenKit>;
let alice: TestParty;
let bob: TestParty;

const HOLDING_ID = identifierString(HOLDING_INTERFACE);
const INSTRUCTION_ID = identifierString(ID.transferInstructionIface);

// biome-ignore lint/suspicious/noExplicitAny: plain JSON navigation over the events
type Ev = Record<string, any>;

/** `p`'s view of one update, ledger effects; with `views`, Holding and TransferInstruction views asked. */
async function effects(
  p: TestParty,
  offset: number,
  views: boolean,
): Promise<{ created: Ev[]; exercised: Ev[] }> {
  const cumulative = [
    { identifierFilter: { WildcardFilter: { value: { includeCreatedEventBlob: false } } } },
    ...(views
      ? [HOLDING_IFACE, INSTRUCTION_IFACE].map((interfaceId) => ({
          identifierFilter: { InterfaceFilter: { value: { interfaceId, includeInterfaceView: true } } },
        }))
      : []),
  ];
  const items = await kit.ledger.updates({
    beginExclusive: offset - 1,
    endInclusive: offset,
    updateFormat: {
      includeTransactions: {
        eventFormat: { filtersByParty: { [p.id]: { cumulative } }, verbose: true },
        transactionShape: 'TRANSACTION_SHAPE_LEDGER_EFFECTS',
      },
    },
  });
  const tx = items.flatMap((i) =>
    i.update && 'Transaction' in i.update ? [i.update.Transaction!.value] : [],
  )[0] as JsTransaction | undefined;
  expect(tx, `a transaction at ${offset} for ${p.id}`).toBeDefined();
  const events = tx!.events as Ev[];
  return {
    created: events.flatMap((e) => (e.CreatedEvent ? [e.CreatedEvent] : [])),
    exercised: events.flatMap((e) => (e.ExercisedEvent ? [e.ExercisedEvent] : [])),
  };
}

beforeAll(async () => {
  sb = await startSandbox({ seed: 'ledger-effects', timers: false });
  kit = tokenKit(sb);
  alice = addExternalParty(sb.ctx.net, 'alice');
  bob = addExternalParty(sb.ctx.net, 'bob');
  await kit.tap(alice, '100');
});
afterAll(async () => sb?.close());

describe('ledger effects carry interface views and implemented interfaces', () => {
  it('an accepted offer, as the receiver sees it: the transient amulet has its view, consuming exercises name Holding / TransferInstruction', async () => {
    await kit.transfer(alice, bob, '10', 'memo-1');
    const [cid] = await kit.instructions(bob);
    const done = await kit.answer(bob, cid!, 'accept');
    const { created, exercised } = await effects(bob, done.offset, true);

    const root = exercised.find((e) => e.choice === 'TransferInstruction_Accept')!;
    expect(root.consuming).toBe(true);
    expect(root.implementedInterfaces).toEqual([INSTRUCTION_ID]);
    const unlock = exercised.find((e) => e.choice === 'LockedAmulet_Unlock')!;
    expect(unlock.implementedInterfaces).toEqual([HOLDING_ID]);
    expect(unlock.exerciseResult.meta.values['splice.lfdecentralizedtrust.org/tx-kind']).toBe('unlock');
    // Non-consuming exercises on contracts that implement no such interface: none.
    expect(exercised.find((e) => e.choice === 'AmuletRules_Transfer')!.implementedInterfaces).toEqual([]);

    // The amulet the unlock creates is spent in the same transaction: still a Holding view (alice's).
    const transient = created.find((c) => c.contractId === unlock.exerciseResult.amuletSum.amulet)!;
    expect(transient.acsDelta).toBe(false);
    expect(transient.interfaceViews).toEqual([
      expect.objectContaining({
        interfaceId: HOLDING_ID,
        viewValue: expect.objectContaining({ owner: alice.id, amount: '10.0000000000', lock: null }),
      }),
    ]);
    const spent = exercised.find((e) => e.contractId === transient.contractId && e.consuming)!;
    expect(spent.implementedInterfaces).toEqual([HOLDING_ID]);
    // Bob's new amulet too.
    const received = created.find((c) => c.interfaceViews[0]?.viewValue.owner === bob.id)!;
    expect(received.interfaceViews[0].viewValue.amount).toBe('10.0000000000');
  });

  it('without interface filters: no views and no implemented interfaces', async () => {
    await kit.transfer(alice, bob, '5');
    const [cid] = await kit.instructions(bob);
    const done = await kit.answer(bob, cid!, 'reject');
    const { created, exercised } = await effects(bob, done.offset, false);
    expect(exercised.length).toBeGreaterThan(0);
    for (const e of exercised) expect(e.implementedInterfaces).toEqual([]);
    for (const c of created) expect(c.interfaceViews).toEqual([]);
  });

  it("the network's own transactions (a tap, an expiry): views on creates, implemented interfaces on archives", async () => {
    const tapped = sb.ctx.net.tap(bob.id, '7');
    const tap = await effects(bob, tapped.createdOffset, true);
    expect(tap.created[0]!.interfaceViews).toEqual([
      expect.objectContaining({
        interfaceId: HOLDING_ID,
        viewValue: expect.objectContaining({ amount: '7.0000000000' }),
      }),
    ]);

    await kit.transfer(alice, bob, '3');
    const [cid] = await kit.instructions(bob);
    sb.ctx.net.clock.advance(2 * 3_600_000);
    step(sb.ctx.net);
    const expiry = await effects(bob, sb.ctx.net.store.ledgerEnd(), true);
    const archived = expiry.exercised.find((e) => e.contractId === cid)!;
    expect(archived.choice).toBe('Archive');
    expect(archived.implementedInterfaces).toEqual([INSTRUCTION_ID]);
  });
});
