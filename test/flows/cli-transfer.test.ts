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

  it('bad flow arguments exit 2 naming the option and the form, before anything is asked of the network', async () => {
    const ledgerEnd = sb.ctx.net.store.ledgerEnd();
    const usage = async (args: string[], line: string) => {
      const r = await cli(args);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(`canton-signer: ${line}\n`);
      expect(r.status).toBe(2);
    };
    const t = (...more: string[]) => ['transfer', '--from', alice.partyId, '--to', bob.partyId, ...more];
    await usage(t('--amount', '12,5'), '--amount: 12,5 uses a comma: write the decimals after a dot (12.5)');
    await usage(
      t('--amount', '1.00000000001'),
      '--amount: 1.00000000001 has more than 10 decimals: expected a decimal number with a dot and at most 10 decimals, e.g. 12.5',
    );
    await usage(
      t('--amount', 'ten'),
      '--amount: expected a decimal number with a dot and at most 10 decimals, e.g. 12.5; got ten',
    );
    await usage(t('--amount', '0'), '--amount: must be more than 0; got 0');
    await usage(
      t('--amount', '1', '--execute-before', 'tomorrow'),
      '--execute-before: expected an ISO-8601 time with a time zone, e.g. 2030-01-31T12:00:00Z; got tomorrow',
    );
    await usage(
      t('--amount', '1', '--execute-before', '2001-01-01T00:00:00Z'),
      '--execute-before: 2001-01-01T00:00:00Z is not in the future: give a later time',
    );
    // A hint is not a party id: the party book's party with that hint is suggested.
    await usage(
      ['transfer', '--from', 'alice', '--to', bob.partyId, '--amount', '1'],
      `--from: alice is a party hint, not a party id: did you mean ${alice.partyId}? (\`canton-signer party list\` shows the party book)`,
    );
    await usage(
      ['transfer', '--from', alice.partyId, '--to', 'nobody', '--amount', '1'],
      '--to: nobody is neither a party id (hint::1220…) nor an ANS name (name.unverified.cns)',
    );
    await usage(
      ['transfer', '--from', 'alice::12', '--to', bob.partyId, '--amount', '1'],
      '--from: alice::12 is not a well-formed party id: expected hint::1220 followed by 64 hexadecimal digits',
    );
    await usage(
      ['holdings', 'merge', alice.partyId, '--batch', '1'],
      '--batch: expected a whole number from 2 to 100; got 1',
    );
    await usage(
      ['holdings', 'merge', alice.partyId, '--fee-reserve', '-1'],
      '--fee-reserve: expected a decimal number with a dot and at most 10 decimals, e.g. 12.5 (or 0); got -1',
    );
    await usage(
      ['holdings', 'list', 'bob'],
      `PARTY: bob is a party hint, not a party id: did you mean ${bob.partyId}? (\`canton-signer party list\` shows the party book)`,
    );
    expect(sb.ctx.net.store.ledgerEnd()).toBe(ledgerEnd);
  });

  it('a sandbox that is not running: one sentence naming the URL and how to start it (exit 1)', async () => {
    const r = await runCli(
      ['holdings', 'list', alice.partyId, '--sandbox', 'http://127.0.0.1:9', '--keystore', dir],
      { env: cliEnv({ CANTON_SIGNER_PASSPHRASE: PASSPHRASE }) },
    );
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      'canton-signer: cannot reach the sandbox at http://127.0.0.1:9: nothing answers there (ECONNREFUSED): start it with `npx canton-signer sandbox` (default port 7575), or check --sandbox\n',
    );
    const direct = await runCli(
      [
        'holdings',
        'list',
        alice.partyId,
        '--ledger-api',
        'http://127.0.0.1:9',
        '--validator',
        'http://127.0.0.1:9/api/validator',
        '--user',
        'u',
        '--keystore',
        dir,
      ],
      { env: cliEnv({ CANTON_SIGNER_PASSPHRASE: PASSPHRASE }) },
    );
    expect(direct.status).toBe(1);
    expect(direct.stderr).toMatch(
      /^canton-signer: cannot reach (the Ledger API|the validator)\S* at http:\/\/127\.0\.0\.1:9\S*: nothing answers there \(ECONNREFUSED\): check that it runs and that --(ledger-api|validator) \(CANTON_SIGNER_(LEDGER_API|VALIDATOR)_URL\) is right\n$/,
    );
  });
});
