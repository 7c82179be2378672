/**
 * The official Canton Wallet SDK (`@canton-network/wallet-sdk`, pinned), unmodified,
 * through its standard flows against `canton-signer sandbox` started as its own
 * process with auth required: OIDC discovery and client-credentials tokens,
 * user and rights, parties, external parties online and offline, tap,
 * holdings and their history, two-step transfers (accept, reject, withdraw),
 * preapprovals (create, status, renew, cancel) and a direct transfer through
 * one, a UTXO merge, a transaction by id, Scan lookups and history, and event
 * streams over WebSocket. Every prepared transaction the SDK hashes itself is
 * also hashed by canton-signer's hasher: the SDK, the sandbox and canton-signer
 * agree on every hash. Nothing sits between the SDK and the sandbox.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ScanClient } from '@canton-network/core-splice-client';
import { hashPreparedTransaction as visualizerHash } from '@canton-network/core-tx-visualizer';
import { AuthTokenProvider } from '@canton-network/core-wallet-auth';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { base64ToBytes, bytesToHex } from '../../src/hashing/input.js';
import { hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import { installSdkPolyfills, type SandboxProcess, startSandboxProcess } from '../support/sdk-env.js';

installSdkPolyfills();
const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');
const { SDK, signTransactionHash } = await import('@canton-network/wallet-sdk');
type Sdk = Awaited<ReturnType<typeof makeSdk>>;
type Keys = { publicKey: string; privateKey: string };
type Party = { partyId: string; keys: Keys };

let sandbox: SandboxProcess;
let sdk: Sdk;
const offline = SDK.createOffline({ logAdapter: 'console' });

function authConfig(s: SandboxProcess) {
  return {
    method: 'client_credentials' as const,
    configUrl: s.info.oidcDiscovery ?? `${new URL(s.info.ledgerApi).origin}/.well-known/openid-configuration`,
    credentials: {
      clientId: s.client.id,
      clientSecret: s.client.secret,
      audience: 'https://canton.network.global',
      scope: 'daml_ledger_api',
    },
  };
}

async function makeSdk(s: SandboxProcess) {
  const auth = authConfig(s);
  const registry = new URL(s.info.registry);
  return SDK.create({
    auth,
    ledgerClientUrl: s.info.ledgerApi,
    logAdapter: 'console',
    token: { validatorUrl: s.info.validator, registries: [registry], auth },
    amulet: { validatorUrl: s.info.validator, scanApiUrl: s.info.scan, registryUrl: registry, auth },
    events: { websocketURL: s.info.ledgerApi.replace(/^http/, 'ws'), auth },
  });
}

/** The SDK's own hash, core-tx-visualizer's, canton-signer's and the participant's claimed hash of one prepared response. */
async function threeHashes(response: {
  preparedTransaction: string;
  preparedTransactionHash: string;
  hashingSchemeVersion: string;
}) {
  const sdkHash = (await offline.utils.hash.preparedTransaction(response.preparedTransaction)).toHex();
  const scheme = response.hashingSchemeVersion === 'HASHING_SCHEME_VERSION_V3' ? 'v3' : 'v2';
  const ours = bytesToHex(hashPreparedTransaction(response.preparedTransaction, { scheme }));
  const participant = bytesToHex(base64ToBytes(response.preparedTransactionHash));
  const visualizer = scheme === 'v2' ? await visualizerHash(response.preparedTransaction, 'hex') : ours;
  return { sdkHash, visualizer, ours, participant };
}

/** Prepares, checks the three hashes agree, signs offline with the party's key and executes. */
async function signAndExecute(
  party: Party,
  commands: unknown,
  disclosedContracts: unknown[] = [],
): Promise<{ updateId: string }> {
  const prepared = sdk.ledger.prepare({
    partyId: party.partyId,
    commands: commands as never,
    disclosedContracts: disclosedContracts as never,
  });
  const { response } = await prepared.toJSON();
  const h = await threeHashes(response);
  expect(h.sdkHash).toBe(h.participant);
  expect(h.ours).toBe(h.participant);
  expect(h.visualizer).toBe(h.participant);
  const signature = signTransactionHash(response.preparedTransactionHash, party.keys.privateKey);
  const signed = sdk.ledger.fromSignature(response, signature);
  const r = (await sdk.ledger.execute(signed, { partyId: party.partyId })) as { updateId: string };
  expect(r.updateId).toMatch(/^[0-9a-f]{64,}$/);
  return r;
}

async function newPartyOnline(hint: string): Promise<Party> {
  const keys = sdk.keys.generate() as Keys;
  const p = await sdk.party.external
    .create(keys.publicKey, { partyHint: hint })
    .sign(keys.privateKey)
    .execute();
  return { partyId: p.partyId, keys };
}

const amountOf = (utxos: { interfaceViewValue: { amount: string } }[]) =>
  utxos.reduce((a, u) => a + Number(u.interfaceViewValue.amount), 0);

/** An Authorization header with a token of the SDK's own auth provider. */
async function bearer(): Promise<Record<string, string>> {
  const token = await new AuthTokenProvider(authConfig(sandbox), pino({ level: 'silent' })).getAccessToken();
  return { authorization: `Bearer ${token}` };
}

beforeAll(async () => {
  // A second client with the credentials the walkthrough in docs/sandbox.md uses by default.
  sandbox = await startSandboxProcess({ extraArgs: ['--client', 'wallet:wallet-secret:validator-operator'] });
  sdk = await makeSdk(sandbox);
}, 60_000);

afterAll(async () => {
  await sandbox?.stop();
});

describe('the official Wallet SDK against canton-signer sandbox', () => {
  let alice: Party;
  let bob: Party;
  let carol: Party;

  it('connects: discovery, a signed token, the ledger end and the user', async () => {
    expect(await sdk.ledger.ledgerEnd()).toBeGreaterThanOrEqual(0);
    const users = await sdk.user.list();
    expect(users.users?.map((u) => u.id)).toContain(sandbox.client.user);
    const rights = await sdk.user.rights.list();
    expect(JSON.stringify(rights.rights)).toContain(sandbox.info.validatorParty);
  });

  it('allocates an internal party, creates a user for it, grants and revokes its rights', async () => {
    const internal = await sdk.party.internal.allocate({ partyHint: 'sdk-treasury' });
    const party = String(internal);
    expect(party).toMatch(/^sdk-treasury::1220[0-9a-f]{64}$/);
    const id = `sdk-user-${randomUUID().slice(0, 8)}`;
    const created = await sdk.user.create({
      userId: id,
      primaryParty: party,
      userRights: { readAs: [party] },
    });
    expect(created).toMatchObject({ id, primaryParty: party });
    expect((await sdk.user.list()).users?.map((u) => u.id)).toContain(id);
    await sdk.user.rights.grant({ userId: id, userRights: { actAs: [party] } });
    const rightsOf = async () => {
      const r = await fetch(`${sandbox.info.ledgerApi}/v2/users/${id}/rights`, { headers: await bearer() });
      return JSON.stringify(await r.json());
    };
    expect(await rightsOf()).toContain('CanActAs');
    await sdk.user.rights.revoke({ userId: id, userRights: { actAs: [party] } });
    expect(await rightsOf()).not.toContain('CanActAs');
    expect(await rightsOf()).toContain('CanReadAs');
  });

  it('allocates an external Ed25519 party online (.sign(priv).execute()) and lists it', async () => {
    alice = await newPartyOnline('sdk-alice');
    expect(alice.partyId).toMatch(/^sdk-alice::1220[0-9a-f]{64}$/);
    expect(await sdk.party.list()).toContain(alice.partyId);
  });

  it('allocates a party offline: the multi-hash signed outside the SDK', async () => {
    const keys = sdk.keys.generate() as Keys;
    const creation = sdk.party.external.create(keys.publicKey, { partyHint: 'sdk-bob' });
    const topology = await creation.topology();
    // The offline SDK recomputes the multi-hash from the topology transactions alone.
    expect(await offline.utils.hash.topologyTransaction(topology.topologyTransactions)).toBe(
      topology.multiHash,
    );
    const p = await creation.execute(signTransactionHash(topology.multiHash, keys.privateKey));
    expect(p.publicKeyFingerprint).toBe(await sdk.keys.fingerprint(keys.publicKey));
    bob = { partyId: p.partyId, keys };
    carol = await newPartyOnline('sdk-carol');
  });

  it('pings itself: a Canton.Internal.Ping create, online', async () => {
    const cmd = sdk.utils.ping.create([{ initiator: alice.partyId, responder: alice.partyId }]);
    const r = await sdk.ledger
      .prepare({ partyId: alice.partyId, commands: cmd as never, disclosedContracts: [] })
      .sign(alice.keys.privateKey)
      .execute({ partyId: alice.partyId });
    expect((r as { updateId: string }).updateId).toBeTruthy();
  });

  it('taps and lists holdings', async () => {
    const [tap, disclosed] = await sdk.amulet.tap(alice.partyId, '10000');
    await signAndExecute(alice, tap, disclosed as unknown[]);
    const utxos = await sdk.token.utxos.list({ partyId: alice.partyId });
    expect(utxos.map((u) => u.interfaceViewValue.amount)).toContain('10000.0000000000');
    expect(utxos.every((u) => u.interfaceViewValue.instrumentId.id === 'Amulet')).toBe(true);
  });

  it('transfers two-step; the receiver accepts; holdings history shows both sides', async () => {
    const [transfer, disclosed] = await sdk.token.transfer.create({
      sender: alice.partyId,
      recipient: bob.partyId,
      amount: '2000',
      instrumentId: 'Amulet',
      registryUrl: new URL(sandbox.info.registry),
      memo: 'sdk-accept',
    });
    await signAndExecute(alice, transfer, disclosed as unknown[]);
    const pending = await sdk.token.transfer.pending(bob.partyId);
    expect(pending).toHaveLength(1);
    const [accept, acceptDisclosed] = await sdk.token.transfer.accept({
      transferInstructionCid: pending[0]!.contractId,
      registryUrl: new URL(sandbox.info.registry),
    });
    await signAndExecute(bob, accept, acceptDisclosed as unknown[]);
    expect(amountOf(await sdk.token.utxos.list({ partyId: bob.partyId }))).toBe(2000);
    expect(await sdk.token.transfer.pending(bob.partyId)).toHaveLength(0);
    const history = await sdk.token.holdings({ partyId: bob.partyId });
    // The offer and its acceptance, read through the token standard's interfaces.
    expect(history.transactions.length).toBeGreaterThan(0);
    expect(JSON.stringify(history.transactions)).toContain('2000.0000000000');
    const last = history.transactions.at(-1)!;
    const byId = await sdk.token.transactionsById({ updateId: last.updateId, partyId: bob.partyId });
    expect(byId.updateId).toBe(last.updateId);
  });

  it('rejects one offer and withdraws another; the sender gets both back', async () => {
    const registryUrl = new URL(sandbox.info.registry);
    const before = amountOf(await sdk.token.utxos.list({ partyId: alice.partyId }));
    for (const [outcome, amount] of [
      ['reject', '100'],
      ['withdraw', '50'],
    ] as const) {
      const [transfer, disclosed] = await sdk.token.transfer.create({
        sender: alice.partyId,
        recipient: carol.partyId,
        amount,
        instrumentId: 'Amulet',
        registryUrl,
      });
      await signAndExecute(alice, transfer, disclosed as unknown[]);
      const pending = await sdk.token.transfer.pending(carol.partyId);
      expect(pending).toHaveLength(1);
      const cid = pending[0]!.contractId;
      if (outcome === 'reject') {
        const [cmd, d] = await sdk.token.transfer.reject({ transferInstructionCid: cid, registryUrl });
        await signAndExecute(carol, cmd, d as unknown[]);
      } else {
        const [cmd, d] = await sdk.token.transfer.withdraw({ transferInstructionCid: cid, registryUrl });
        await signAndExecute(alice, cmd, d as unknown[]);
      }
      expect(await sdk.token.transfer.pending(carol.partyId)).toHaveLength(0);
    }
    const after = amountOf(await sdk.token.utxos.list({ partyId: alice.partyId }));
    // Both offers came back; only fees (a few CC at most) were spent.
    expect(before - after).toBeLessThan(5);
    expect(amountOf(await sdk.token.utxos.list({ partyId: carol.partyId }))).toBe(0);
  });

  it('preapproval: create, status, a direct transfer through it, renew, cancel', async () => {
    const create = await sdk.amulet.preapproval.command.create({ parties: { receiver: carol.partyId } });
    await signAndExecute(carol, create);
    const status = await sdk.amulet.preapproval.fetchStatus(carol.partyId);
    expect(status?.contractId).toBeTruthy();
    const [transfer, disclosed] = await sdk.token.transfer.create({
      sender: alice.partyId,
      recipient: carol.partyId,
      amount: '300',
      instrumentId: 'Amulet',
      registryUrl: new URL(sandbox.info.registry),
    });
    await signAndExecute(alice, transfer, disclosed as unknown[]);
    // One step: no offer waits, the receiver holds it.
    expect(await sdk.token.transfer.pending(carol.partyId)).toHaveLength(0);
    expect(amountOf(await sdk.token.utxos.list({ partyId: carol.partyId }))).toBe(300);

    await sdk.amulet.tapInternal('1000');
    const newExpiry = new Date(status!.expiresAt.getTime() + 2 * 86_400_000);
    await sdk.amulet.preapproval.renew({ parties: { receiver: carol.partyId }, expiresAt: newExpiry });
    const renewed = await sdk.amulet.preapproval.fetchStatus(carol.partyId, { oldCid: status!.contractId });
    expect(renewed!.expiresAt.getTime()).toBeGreaterThan(status!.expiresAt.getTime());

    const [cancel, cancelDisclosed] = await sdk.amulet.preapproval.command.cancel({
      parties: { receiver: carol.partyId },
    });
    expect(cancel).not.toBeNull();
    await signAndExecute(carol, cancel, cancelDisclosed as unknown[]);
    expect(await sdk.amulet.preapproval.fetchStatus(carol.partyId, { cancelled: true })).toBeNull();
  });

  it('merges UTXOs into one', async () => {
    for (let i = 0; i < 3; i++) {
      const [tap, disclosed] = await sdk.amulet.tap(bob.partyId, '10');
      await signAndExecute(bob, tap, disclosed as unknown[]);
    }
    const before = await sdk.token.utxos.list({ partyId: bob.partyId });
    expect(before.length).toBeGreaterThanOrEqual(4);
    const [commands, disclosed] = await sdk.token.utxos.merge({ partyId: bob.partyId });
    for (const c of commands) await signAndExecute(bob, c, disclosed as unknown[]);
    const after = await sdk.token.utxos.list({ partyId: bob.partyId });
    expect(after).toHaveLength(1);
    expect(Math.abs(amountOf(after) - amountOf(before))).toBeLessThan(1);
  });

  it("looks things up in Scan and reads its history with the SDK's Scan client", async () => {
    const logger = pino({ level: 'silent' });
    const scan = new ScanClient(
      new URL(sandbox.info.scan),
      logger,
      new AuthTokenProvider(authConfig(sandbox), logger),
    );
    const rules = await scan.getAmuletRules();
    expect(rules.template_id).toContain('AmuletRules');
    const rounds = await scan.getOpenMiningRounds();
    expect(rounds.length).toBeGreaterThan(0);
    const dso = (await scan.get('/v0/dso-party-id')) as { dso_party_id: string };
    expect(dso.dso_party_id).toBe(sandbox.info.dsoParty);
    const history = await scan.post('/v0/transactions', { page_size: 100, sort_order: 'asc' } as never);
    const txs = (history as { transactions: { transaction_type: string }[] }).transactions;
    expect(txs.map((t) => t.transaction_type)).toContain('transfer');
  });

  it('runs the walkthrough of docs/sandbox.md as written', async () => {
    const doc = readFileSync(join(ROOT, 'docs', 'sandbox.md'), 'utf8');
    const m = /<!-- sdk-walkthrough:[^>]*-->\n```js\n([\s\S]*?)\n```/.exec(doc);
    expect(m, 'docs/sandbox.md has the sdk-walkthrough block').not.toBeNull();
    // Under the repository's node_modules, so that the script resolves the SDK as a user's project does.
    const dir = join(ROOT, 'node_modules', '.cache', 'canton-signer-walkthrough');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'wallet.mjs'), m![1]!);
    const { stdout } = await run(process.execPath, [join(dir, 'wallet.mjs')], {
      env: { PATH: process.env.PATH ?? '', SANDBOX: sandbox.info.ledgerApi },
      timeout: 60_000,
    }).catch((e: { message: string; stdout?: string }) => {
      // The script's own output says where it stopped.
      throw new Error(`${e.message}\n${(e.stdout ?? '').slice(-4000)}`);
    });
    // The SDK logs to standard output too, asynchronously (before or after the script's own line).
    const own = stdout.split('\n').filter((line) => line.startsWith('alice::'));
    expect(own).toHaveLength(1);
    expect(own[0]).toMatch(/^alice::1220[0-9a-f]{64} \[ '100\.0000000000' \]$/);
  }, 60_000);

  it('streams updates and completions over WebSocket', async () => {
    const completions = sdk.events.completions({ beginOffset: 0, parties: [alice.partyId] });
    const first = await completions.next();
    expect(JSON.stringify(first.value)).toContain(alice.partyId);
    await completions.return?.(undefined);
    const updates = sdk.events.updates({
      partyId: alice.partyId,
      templateIds: ['#canton-builtin-admin-workflow-ping:Canton.Internal.Ping:Ping'],
    });
    const ping = await updates.next();
    expect(JSON.stringify(ping.value)).toContain('Canton.Internal.Ping:Ping');
    await updates.return?.(undefined);
  });
});
