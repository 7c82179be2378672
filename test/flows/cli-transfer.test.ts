/**
 * The compiled `canton-signer` against a sandbox, as a user runs it: a
 * keystore folder with two parties' keys and the party book, `transfer`
 * (JSON and text), `offers list` / `offers accept`, `holdings list` and
 * `holdings merge`; a refusal exits 1 with `refused (<reason>)` on stderr;
 * bad options exit 2. The journal beside the keystore records the steps and
 * no secret.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type CliKeystore, cliEnv, cliKeystore, runCli } from '../support/cli.js';

const PASSPHRASE = 'cli-transfer-passphrase';

let sb: RunningSandbox;
let ks: CliKeystore;
let dir: string;
let alice: PartyRecord;
let bob: PartyRecord;

const cli = (args: string[]) =>
  runCli([...args, '--sandbox', sb.urls.ledgerApi, '--keystore', dir], {
    env: cliEnv({ CANTON_SIGNER_PASSPHRASE: PASSPHRASE }),
  });

async function ok(args: string[]): Promise<string> {
  const r = await cli(args);
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  return r.stdout;
}

beforeAll(async () => {
  sb = await startSandbox({ seed: 'cli-transfer', timers: false });
  ks = await cliKeystore(sb, 'cli-transfer', PASSPHRASE);
  dir = ks.dir;
  alice = await ks.addParty('alice');
  bob = await ks.addParty('bob');
  for (let i = 0; i < 4; i++) sb.ctx.net.tap(alice.partyId, '25');
});
afterAll(async () => {
  await sb?.close();
  await ks?.close();
});

describe('canton-signer transfer / offers / holdings', () => {
  it('transfer --json offers 12.5; offers list shows it; offers accept moves it; holdings list shows it', async () => {
    const t = JSON.parse(
      await ok([
        'transfer',
        '--from',
        alice.partyId,
        '--to',
        bob.partyId,
        '--amount',
        '12.5',
        '--memo',
        'cli test',
        '--command-id',
        'cli-transfer-1',
        '--json',
      ]),
    ) as { kind: string; commandId: string; amount: string; inputs: string[]; updateId: string };
    expect(t).toMatchObject({ kind: 'offer', commandId: 'cli-transfer-1', amount: '12.5000000000' });
    expect(t.inputs).toHaveLength(1);

    const listed = JSON.parse(await ok(['offers', 'list', bob.partyId, '--json'])) as {
      partyId: string;
      offers: { instructionCid: string; direction: string; memo: string; sender: string }[];
    };
    expect(listed.partyId).toBe(bob.partyId);
    expect(listed.offers).toHaveLength(1);
    expect(listed.offers[0]).toMatchObject({ direction: 'in', memo: 'cli test', sender: alice.partyId });
    const cid = listed.offers[0]!.instructionCid;
    expect(await ok(['offers', 'list', alice.partyId])).toMatch(
      new RegExp(`^OUT ${cid}  12\\.5 Amulet  to `),
    );

    const accepted = await ok(['offers', 'accept', bob.partyId, cid]);
    expect(accepted).toMatch(new RegExp(`^accepted transfer offer ${cid}\\nupdate .+, command .+\\n$`));
    expect(await ok(['offers', 'list', bob.partyId])).toBe(`no pending transfer offers for ${bob.partyId}\n`);

    const hs = JSON.parse(await ok(['holdings', 'list', bob.partyId, '--json'])) as {
      holdings: { amount: string; locked: boolean }[];
    };
    expect(hs.holdings.map((h) => [h.amount, h.locked])).toEqual([['12.5000000000', false]]);

    const journal = (await readFile(join(dir, 'journal.jsonl'), 'utf8')).trim().split('\n');
    const steps = journal.map((l) => JSON.parse(l) as { flow: string; step: string; commandId?: string });
    expect(steps.map((s) => `${s.flow}:${s.step}`)).toEqual([
      'transfer:signed',
      'transfer:submitted',
      'transfer:committed',
      'offer-accept:signed',
      'offer-accept:submitted',
      'offer-accept:committed',
    ]);
    expect(steps[0]!.commandId).toBe('cli-transfer-1');
    expect(journal.join('\n')).not.toContain(PASSPHRASE);
  });

  it('text output; holdings merge; a refusal exits 1 naming the reason; bad usage exits 2', async () => {
    const text = await ok(['transfer', '--from', alice.partyId, '--to', alice.partyId, '--amount', '60']);
    expect(text).toMatch(/^moved 60 Amulet to .* itself \(self-transfer\)\nupdate /);

    const merged = JSON.parse(
      await ok(['holdings', 'merge', alice.partyId, '--threshold', '1', '--json']),
    ) as {
      before: { count: number; total: string };
      after: { count: number; total: string };
    };
    expect(merged.before.count).toBeGreaterThan(1);
    expect(merged.after).toEqual({ count: 1, total: merged.before.total });

    const refused = await cli([
      'transfer',
      '--from',
      alice.partyId,
      '--to',
      bob.partyId,
      '--amount',
      '100000',
    ]);
    expect(refused.status).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toMatch(/^canton-signer: refused \(bad_request\): insufficient funds: /);

    const bad = await cli([
      'transfer',
      '--from',
      alice.partyId,
      '--to',
      bob.partyId,
      '--amount',
      '1',
      '--instrument',
      'nonsense',
    ]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--instrument/);
    const missing = await cli(['transfer', '--from', alice.partyId, '--amount', '1']);
    expect(missing.status).toBe(2);
  });
});
