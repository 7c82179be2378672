/**
 * `canton-signer party …` as a user runs it: the compiled command against an
 * in-process sandbox (`--sandbox ORIGIN`), keys made with `keys create`, the
 * keystore and passphrase from the environment, a participant-admin token
 * for the Ledger API. Onboard on both paths, re-run, list, show (by party id
 * and by ANS name), balance; refusals exit 1 with one line on stderr.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ansEntryContract } from '../../src/sandbox/amulet.js';
import { LEDGER_API_USER, VALIDATOR_USER } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { type CliRun, runCli } from '../support/cli.js';

const PASSPHRASE = 'cli-party-passphrase-not-printed';
const TOKEN = 'cli-party-admin-token-not-printed';

let sb: RunningSandbox;
let dir: string;

/** Runs the CLI asynchronously (the sandbox answers from this process); no secret may reach its output. */
async function cli(args: string[], extraEnv: Record<string, string> = {}): Promise<CliRun> {
  const r = await runCli(args, {
    env: {
      PATH: process.env.PATH ?? '',
      CANTON_SIGNER_KEYSTORE: dir,
      CANTON_SIGNER_PASSPHRASE: PASSPHRASE,
      CANTON_SIGNER_LEDGER_API_TOKEN: TOKEN,
      ...extraEnv,
    },
  });
  for (const secret of [PASSPHRASE, TOKEN]) {
    expect(r.stdout).not.toContain(secret);
    expect(r.stderr).not.toContain(secret);
  }
  return r;
}

const net = () => sb.ctx.net;
const withSandbox = (...args: string[]) => [...args, '--sandbox', sb.urls.origin];

async function createKey(label: string, scheme: string): Promise<{ fingerprint: string }> {
  const r = await cli(['keys', 'create', '--label', label, '--scheme', scheme, '--json']);
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { fingerprint: string };
}

let edFp: string;
let ecFp: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'canton-signer-cli-party-'));
  sb = await startSandbox({
    seed: 'cli-party',
    timers: false,
    auth: { tokens: { [TOKEN]: VALIDATOR_USER } },
  });
  edFp = (await createKey('cli-ed', 'ed25519')).fingerprint;
  ecFp = (await createKey('cli-ec', 'ecdsa-p256')).fingerprint;
  // The ANS name of the party the first test onboards (an entry may name a party before it exists).
  net().commitInternal({
    archives: [],
    creates: [
      ansEntryContract(
        net().dso,
        `cli-alice::${edFp}`,
        'cli-alice.unverified.cns',
        net().clock.now() + 86_400_000_000n,
      ),
    ],
    commandId: 'cli-party-ans',
  });
}, 30_000);

afterAll(async () => {
  await sb?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('canton-signer party', () => {
  it('onboard --via validator (Ed25519), then again: idempotent', async () => {
    const r = await cli(
      withSandbox(
        'party',
        'onboard',
        '--hint',
        'cli-alice',
        '--key',
        'cli-ed',
        '--via',
        'validator',
        '--json',
      ),
    );
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as {
      status: string;
      party: { partyId: string; via: string };
      signedHashes: string[];
    };
    expect(out.status).toBe('new');
    expect(out.party.partyId).toBe(`cli-alice::${edFp}`);
    expect(out.party.via).toBe('validator');
    expect(out.signedHashes).toHaveLength(3);
    expect(net().parties.get(out.party.partyId)?.keys[0]?.fingerprint).toBe(edFp);
    // The rights go to the user the token acts as, not to the sandbox's default user.
    expect(net().users.get(VALIDATOR_USER)!.actAs.has(out.party.partyId)).toBe(true);
    expect(net().users.get(LEDGER_API_USER)!.actAs.has(out.party.partyId)).toBe(false);

    const again = await cli(
      withSandbox('party', 'onboard', '--hint', 'cli-alice', '--key', 'cli-ed', '--via', 'validator'),
    );
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^status: {7}already onboarded/m);
    expect(again.stdout).toContain(`party:        cli-alice::${edFp}`);
  });

  it('onboard through the Ledger API (default) with a P-256 key', async () => {
    const r = await cli(withSandbox('party', 'onboard', '--hint', 'cli-bob', '--key', 'cli-ec'));
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^status: {7}onboarded$/m);
    expect(r.stdout).toContain(`key:          cli-ec (ecdsa-p256, ${ecFp})`);
    expect(r.stdout).toContain('via:          ledger-api');
    expect(net().parties.get(`cli-bob::${ecFp}`)?.via).toBe('ledger-api');
  });

  it('refusals exit 1 with one line: a P-256 key on the validator path', async () => {
    const r = await cli(
      withSandbox('party', 'onboard', '--hint', 'cli-carol', '--key', 'cli-ec', '--via', 'validator'),
    );
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      /^canton-signer: refused \(bad_request\): the validator onboards Ed25519 keys only/,
    );
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('--participant: another participant than the one the participant reports is refused (exit 1)', async () => {
    const r = await cli(
      withSandbox(
        'party',
        'onboard',
        '--hint',
        'cli-dan',
        '--key',
        'cli-ed',
        '--participant',
        'PAR::other::1220ee',
      ),
    );
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      /^canton-signer: refused \(topology_mismatch\): expected the participant to be other::1220ee/,
    );
    expect(net().parties.has(`cli-dan::${edFp}`)).toBe(false);
  });

  it('a hosted party missing from the party book is booked again from the journal file, not without it', async () => {
    const r = await cli(withSandbox('party', 'onboard', '--hint', 'cli-rec', '--key', 'cli-ec', '--json'));
    expect(r.status, r.stderr).toBe(0);
    const partyId = `cli-rec::${ecFp}`;
    const bookPath = join(dir, 'parties.json');
    const book = JSON.parse(await readFile(bookPath, 'utf8')) as { parties: { partyId: string }[] };
    const forget = async () => {
      const now = JSON.parse(await readFile(bookPath, 'utf8')) as typeof book;
      await writeFile(
        bookPath,
        JSON.stringify({ ...now, parties: now.parties.filter((p) => p.partyId !== partyId) }),
      );
    };
    await forget();
    // Another (empty) journal: no record of having signed it.
    const none = await cli(
      withSandbox(
        'party',
        'onboard',
        '--hint',
        'cli-rec',
        '--key',
        'cli-ec',
        '--journal',
        join(dir, 'other.jsonl'),
      ),
    );
    expect(none.status).toBe(1);
    expect(none.stderr).toMatch(/refused \(topology_mismatch\): .*no record of signing and submitting/);
    const again = await cli(withSandbox('party', 'onboard', '--hint', 'cli-rec', '--key', 'cli-ec'));
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^status: {7}already hosted; added to the party book/m);
    await forget(); // the later tests list the book as the first two onboardings left it
  });

  it('--synchronizer with --via validator is a usage error (exit 2)', async () => {
    const r = await cli(
      withSandbox(
        'party',
        'onboard',
        '--hint',
        'x',
        '--key',
        'cli-ed',
        '--via',
        'validator',
        '--synchronizer',
        's',
      ),
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--synchronizer applies to --via ledger-api only/);
  });

  it('list shows the party book', async () => {
    const r = await cli(['party', 'list', '--json']);
    expect(r.status, r.stderr).toBe(0);
    const { parties } = JSON.parse(r.stdout) as { parties: { partyId: string }[] };
    expect(parties.map((p) => p.partyId).sort()).toEqual([`cli-alice::${edFp}`, `cli-bob::${ecFp}`].sort());
    const text = await cli(['party', 'list']);
    expect(text.stdout).toContain(`cli-bob::${ecFp}\tcli-ec\tecdsa-p256\tledger-api`);
  });

  it('show by party id and by ANS name; an unknown name is refused', async () => {
    const alice = `cli-alice::${edFp}`;
    const byId = await cli(withSandbox('party', 'show', alice, '--json'));
    expect(byId.status, byId.stderr).toBe(0);
    const v = JSON.parse(byId.stdout) as Record<string, unknown>;
    expect(v).toMatchObject({
      partyId: alice,
      ansName: 'cli-alice.unverified.cns',
      preapproval: null,
      notes: [],
    });
    expect((v.record as { keyLabel: string }).keyLabel).toBe('cli-ed');

    const byName = await cli(withSandbox('party', 'show', 'cli-alice.unverified.cns'));
    expect(byName.status, byName.stderr).toBe(0);
    expect(byName.stdout).toContain(`party:        ${alice}`);
    expect(byName.stdout).toContain('given as:     cli-alice.unverified.cns');
    expect(byName.stdout).toContain(`hosted:       yes, on ${net().synchronizerId}`);
    expect(byName.stdout).toContain('preapproval:  (none)');

    const unknown = await cli(withSandbox('party', 'show', 'nobody.unverified.cns'));
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toBe(
      'canton-signer: refused (bad_request): no ANS entry named nobody.unverified.cns\n',
    );
  });

  it('balance by ANS name: holdings, dust, text and JSON', async () => {
    const alice = `cli-alice::${edFp}`;
    net().tap(alice, '100.0');
    net().tap(alice, '0.5');
    const r = await cli(withSandbox('party', 'balance', 'cli-alice.unverified.cns', '--json'));
    expect(r.status, r.stderr).toBe(0);
    const b = JSON.parse(r.stdout) as {
      partyId: string;
      name: string;
      holdings: { instrument: { id: string }; unlocked: string; count: number }[];
      dustCount: number;
    };
    expect(b.partyId).toBe(alice);
    expect(b.name).toBe('cli-alice.unverified.cns');
    expect(b.holdings).toHaveLength(1);
    expect(b.holdings[0]!.instrument.id).toBe('Amulet');
    expect(b.holdings[0]!.count).toBe(2);
    expect(Number(b.holdings[0]!.unlocked)).toBeCloseTo(100.5, 6);
    expect(b.dustCount).toBe(1);
    const text = await cli(withSandbox('party', 'balance', alice));
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toContain(`party:        ${alice}`);
    expect(text.stdout).toMatch(
      /^holding: {6}Amulet \(DSO::1220[0-9a-f]+\): unlocked 100\.5\d*, locked 0\.?\d*, 2 contracts$/m,
    );
    expect(text.stdout).toContain('dust:         1 holding');
  });

  it('--participant takes the id with or without PAR::; the party is booked and shown without it', async () => {
    const id = net().participantId;
    const r = await cli(
      withSandbox(
        'party',
        'onboard',
        '--hint',
        'cli-par',
        '--key',
        'cli-ed',
        '--participant',
        `PAR::${id}`,
        '--json',
      ),
    );
    expect(r.status, r.stderr).toBe(0);
    const booked = JSON.parse(r.stdout) as { party: { partyId: string; participantUid: string } };
    expect(booked.party.participantUid).toBe(id);
    const again = await cli(
      withSandbox('party', 'onboard', '--hint', 'cli-par', '--key', 'cli-ed', '--participant', id),
    );
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toContain(`participant:  ${id}\n`);
    expect(again.stdout).not.toContain('PAR::');
    const shown = await cli(withSandbox('party', 'show', booked.party.partyId));
    expect(shown.stdout).toContain(`participant:  ${id}\n`);
  });

  it('a party hint where a party is expected: exit 2 with the party id suggested', async () => {
    const r = await cli(withSandbox('party', 'balance', 'cli-par'));
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(
      `canton-signer: PARTY: cli-par is a party hint, not a party id: did you mean cli-par::${edFp}? (\`canton-signer party list\` shows the party book)\n`,
    );
  });
});

describe('the Ledger API user', () => {
  it("the README sequence: onboard with the admin token, tap, transfer by ANS name as the token's user", async () => {
    await createKey('cli-readme', 'ed25519');
    const r = await cli(
      withSandbox('party', 'onboard', '--hint', 'cli-readme', '--key', 'cli-readme', '--json'),
    );
    expect(r.status, r.stderr).toBe(0);
    const partyId = (JSON.parse(r.stdout) as { party: { partyId: string } }).party.partyId;
    expect(net().users.get(VALIDATOR_USER)!.actAs.has(partyId)).toBe(true);
    net().tap(partyId, '100');
    const t = await cli(
      withSandbox(
        'transfer',
        '--from',
        partyId,
        '--to',
        'sandbox-validator-1.unverified.cns',
        '--amount',
        '12.5',
        '--json',
      ),
    );
    expect(t.status, t.stderr).toBe(0);
    expect(JSON.parse(t.stdout)).toMatchObject({ kind: 'offer', amount: '12.5000000000' });
  });

  it('without --user, a token or the sandbox: a participant with no user for the request is a usage error (2); an unreachable one is not', async () => {
    const server = createServer((_req, res) => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'UNAUTHENTICATED', cause: 'no token', errorCategory: 6 }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as AddressInfo).port;
      const args = ['party', 'onboard', '--hint', 'nouser', '--key', 'cli-ed'];
      const r = await cli([...args, '--ledger-api', `http://127.0.0.1:${port}`], {
        CANTON_SIGNER_LEDGER_API_TOKEN: '',
      });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain('no Ledger API user: give --user ID');
      const down = await cli([...args, '--ledger-api', 'http://127.0.0.1:1'], {
        CANTON_SIGNER_LEDGER_API_TOKEN: '',
      });
      expect(down.status).toBe(1);
      expect(down.stderr).toContain('cannot reach the Ledger API at http://127.0.0.1:1');
    } finally {
      server.close();
    }
  });

  it('--user names the Ledger API user explicitly: the rights go to it', async () => {
    await createKey('cli-explicit', 'ed25519');
    const r = await cli(
      withSandbox('party', 'onboard', '--hint', 'cli-explicit', '--key', 'cli-explicit', '--json'),
      { CANTON_SIGNER_LEDGER_API_USER: LEDGER_API_USER },
    );
    expect(r.status, r.stderr).toBe(0);
    const partyId = (JSON.parse(r.stdout) as { party: { partyId: string } }).party.partyId;
    expect(net().users.get(LEDGER_API_USER)!.actAs.has(partyId)).toBe(true);
    expect(net().users.get(VALIDATOR_USER)!.actAs.has(partyId)).toBe(false);
  });
});
