/**
 * `canton-signer approvals …` and `approvers …` as an approver and an admin
 * run them: the built bin against a small fastify server that serves the
 * REST shapes of the approvals API and verifies every signature it receives
 * with verifyApproval (so a CLI that signed other bytes fails here), with
 * file keys of a temp keystore. Checks the summary shown before signing, the
 * refusals (a statement that does not hash to the hash served, an expired or
 * decided request, an ECDSA key, no token, an unregistered key) and that
 * nothing is posted when the command refuses.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FileBackend } from '../../src/keys/file-backend.js';
import { OfflineBackend } from '../../src/keys/offline-backend.js';
import { Signer } from '../../src/keys/signer.js';
import {
  type ApprovalStatement,
  approvalMessage,
  registrationMessage,
  statementHash,
  verifyApproval,
} from '../../src/policy/approval.js';
import { buildDist, type CliRun, cliEnv, runCli } from '../support/cli.js';

const PASS = 'approvals cli passphrase';
const TOKEN = 'approver-token-0123456789';
const HOUR = 3_600_000;

interface Credential {
  id: string;
  approver: string;
  kind: 'ed25519';
  publicKey: string;
  label?: string;
  status: 'pending' | 'active' | 'revoked';
  createdAt: string;
  activatedBy?: string;
}

interface Request {
  id: string;
  status: string;
  statement: ApprovalStatement;
  /** What the server says the hash is (a tampered request serves a hash of another statement). */
  servedHash: string;
  approvals: {
    approver: string;
    decision: 'approve' | 'reject';
    credentialId?: string;
    reason?: string;
    at: string;
    signed: boolean;
  }[];
}

interface Post {
  path: string;
  body: Record<string, unknown>;
  authorization: string | undefined;
  /** Whether the signature verified against the credential's key and the stored statement. */
  verified?: boolean;
}

let dir: string;
let signer: Signer;
let app: FastifyInstance;
let url: string;
let env: NodeJS.ProcessEnv;
let alicePublicKey: string;
const requests = new Map<string, Request>();
const credentials = new Map<string, Credential>();
const posts: Post[] = [];
let gets = 0;

function view(r: Request) {
  const need = r.statement.requirement.map((q) => ({
    group: q.group,
    need: Math.max(0, q.count - r.approvals.filter((a) => a.decision === 'approve').length),
  }));
  return {
    id: r.id,
    subject: r.statement.subject,
    status: r.status,
    statement: r.statement,
    statementHash: r.servedHash,
    requirement: r.statement.requirement,
    approvals: r.approvals.map(({ signed: _, ...a }) => a),
    missing: need.filter((m) => m.need > 0),
    expiresAt: r.statement.expiresAt,
    createdAt: new Date().toISOString(),
    summary: ['a summary line the CLI must not rely on'],
  };
}

function statement(id: string, o: Partial<ApprovalStatement> = {}, memo = 'invoice 42'): ApprovalStatement {
  return {
    v: 1,
    request: id,
    subject: `withdrawal:${id.slice(0, 8)}`,
    party: 'alice::1220aaaa',
    entryPoint: 'withdrawal',
    requester: 'ops-bot',
    actions: [
      {
        kind: 'transfer',
        sender: 'alice::1220aaaa',
        receiver: 'bob::1220bbbb',
        amount: '1500.0000000000',
        instrument: { admin: 'dso::1220cccc', id: 'Amulet' },
        memo,
      },
    ],
    policy: { version: 3, sha256: 'ab'.repeat(32), rule: 'large-needs-two' },
    requirement: [{ group: 'treasury', count: 2 }],
    expiresAt: new Date(Date.now() + 24 * HOUR).toISOString(),
    ...o,
  };
}

function addRequest(
  o: { status?: string; statement?: Partial<ApprovalStatement>; memo?: string } = {},
): Request {
  const id = randomUUID();
  const s = statement(id, o.statement, o.memo);
  const r: Request = {
    id,
    status: o.status ?? 'pending',
    statement: s,
    servedHash: statementHash(s),
    approvals: [],
  };
  requests.set(id, r);
  return r;
}

const postsTo = (path: string) => posts.filter((p) => p.path === path);

async function startServer(): Promise<void> {
  app = Fastify();
  const fail = (status: number, code: string, message: string) => ({ status, body: { code, message } });
  app.addHook('onRequest', async (req, reply) => {
    if (req.headers.authorization !== `Bearer ${TOKEN}`)
      return reply.code(401).send({ code: 'unauthorized', message: 'a bearer token is required' });
  });
  app.get('/v1/approvals', async (req) => {
    gets++;
    const status = (req.query as { status?: string }).status;
    return { items: [...requests.values()].filter((r) => !status || r.status === status).map(view) };
  });
  app.get('/v1/approvals/:id', async (req, reply) => {
    gets++;
    const r = requests.get((req.params as { id: string }).id);
    if (!r) return reply.code(404).send({ code: 'not_found', message: 'no such approval request' });
    return view(r);
  });
  const decide =
    (decision: 'approve' | 'reject') =>
    async (req: import('fastify').FastifyRequest, reply: import('fastify').FastifyReply) => {
      const id = (req.params as { id: string }).id;
      const body = req.body as Record<string, unknown>;
      const post: Post = {
        path: `/v1/approvals/${id}/${decision}`,
        body,
        authorization: req.headers.authorization,
      };
      posts.push(post);
      const r = requests.get(id);
      if (!r) return reply.code(404).send({ code: 'not_found', message: 'no such approval request' });
      const hash = statementHash(r.statement);
      let e: { status: number; body: unknown } | undefined;
      if (r.status !== 'pending') e = fail(409, 'invalid_state', `request is ${r.status}`);
      else if (body.statementHash !== hash) e = fail(409, 'statement_changed', 'the statement hash differs');
      else if (decision === 'reject' && typeof body.reason !== 'string')
        e = fail(400, 'bad_request', 'reason missing');
      if (e) return reply.code(e.status).send(e.body);
      let signed = false;
      if (body.signature !== undefined || decision === 'approve') {
        const c = credentials.get(String(body.credentialId));
        if (c?.status !== 'active')
          return reply.code(400).send({ code: 'bad_credential', message: 'no active credential' });
        post.verified = verifyApproval(c, approvalMessage(hash, decision), String(body.signature));
        if (!post.verified)
          return reply.code(400).send({ code: 'bad_signature', message: 'the signature does not verify' });
        signed = true;
      }
      r.approvals.push({
        approver: 'alice',
        decision,
        ...(typeof body.credentialId === 'string' ? { credentialId: body.credentialId } : {}),
        ...(typeof body.reason === 'string' ? { reason: body.reason } : {}),
        at: new Date().toISOString(),
        signed,
      });
      if (decision === 'reject') r.status = 'rejected';
      return view(r);
    };
  app.post('/v1/approvals/:id/approve', decide('approve'));
  app.post('/v1/approvals/:id/reject', decide('reject'));
  app.get('/v1/approvers/credentials', async () => ({ items: [...credentials.values()] }));
  app.post('/v1/approvers/credentials', async (req, reply) => {
    const body = req.body as Record<string, unknown>;
    const post: Post = { path: '/v1/approvers/credentials', body, authorization: req.headers.authorization };
    posts.push(post);
    const key = { kind: 'ed25519' as const, publicKey: String(body.publicKey) };
    post.verified =
      body.kind === 'ed25519' && verifyApproval(key, registrationMessage(key), String(body.proof));
    if (!post.verified)
      return reply.code(400).send({ code: 'bad_proof', message: 'the proof does not verify' });
    const c: Credential = {
      id: randomUUID(),
      approver: 'alice',
      ...key,
      ...(typeof body.label === 'string' ? { label: body.label } : {}),
      status: 'pending',
      createdAt: new Date().toISOString(),
    };
    credentials.set(c.id, c);
    return reply.code(201).send(c);
  });
  for (const verb of ['activate', 'revoke'] as const)
    app.post(`/v1/approvers/credentials/:id/${verb}`, async (req, reply) => {
      const c = credentials.get((req.params as { id: string }).id);
      posts.push({
        path: `/v1/approvers/credentials/${c?.id}/${verb}`,
        body: {},
        authorization: req.headers.authorization,
      });
      if (!c) return reply.code(404).send({ code: 'not_found', message: 'no such credential' });
      c.status = verb === 'activate' ? 'active' : 'revoked';
      if (verb === 'activate') c.activatedBy = 'admin';
      return c;
    });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

const cli = (args: string[], o: { env?: NodeJS.ProcessEnv } = {}): Promise<CliRun> =>
  runCli(args, { env: o.env ?? env });

beforeAll(async () => {
  buildDist(['cli/approvals.js', 'cli/main.js', 'policy/approval.js']);
  dir = await mkdtemp(join(tmpdir(), 'canton-signer-approvals-'));
  signer = new Signer({
    file: new FileBackend({ dir, passphrase: () => PASS, scrypt: { N: 2 ** 14, r: 8, p: 1 } }),
    offline: new OfflineBackend({ dir: join(dir, 'offline') }),
    stateDir: dir,
  });
  const alice = await signer.generate({ label: 'alice', scheme: 'ed25519', backend: 'file' });
  alicePublicKey = Buffer.from(alice.publicKeyRaw).toString('hex');
  await signer.generate({ label: 'bob', scheme: 'ed25519', backend: 'file' });
  await signer.generate({ label: 'ec', scheme: 'ecdsa-p256', backend: 'file' });
  await startServer();
  env = cliEnv({
    CANTON_SIGNER_URL: url,
    CANTON_SIGNER_TOKEN: TOKEN,
    CANTON_SIGNER_PASSPHRASE: PASS,
    CANTON_SIGNER_KEYSTORE: dir,
  });
});

afterAll(async () => {
  await app?.close();
  await signer?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

beforeEach(() => {
  posts.length = 0;
  gets = 0;
});

describe('approvers', () => {
  it('register posts the public key with a proof that verifies; list, activate and revoke', async () => {
    const reg = await cli(['approvers', 'register', '--key', 'alice', '--label', 'laptop']);
    expect(reg.stderr).toBe('');
    expect(reg.status).toBe(0);
    const [post] = postsTo('/v1/approvers/credentials');
    expect(post?.verified).toBe(true);
    expect(post?.authorization).toBe(`Bearer ${TOKEN}`);
    expect(post?.body).toMatchObject({ kind: 'ed25519', publicKey: alicePublicKey, label: 'laptop' });
    const c = [...credentials.values()].find((x) => x.publicKey === alicePublicKey);
    expect(c?.status).toBe('pending');
    expect(reg.stdout).toContain(`credential ${c?.id}: pending`);
    expect(reg.stdout).toContain(`canton-signer approvers activate ${c?.id}`);

    const list = await cli(['approvers', 'list']);
    expect(list.status).toBe(0);
    expect(list.stdout).toMatch(/^ID\s+STATUS\s+APPROVER\s+KIND\s+PUBLIC KEY\s+LABEL\s+CREATED/);
    expect(list.stdout).toContain(`${c?.id}  pending`);

    const act = await cli(['approvers', 'activate', c?.id as string, '--json']);
    expect(act.status).toBe(0);
    expect(JSON.parse(act.stdout)).toMatchObject({ id: c?.id, status: 'active' });
    expect(credentials.get(c?.id as string)?.status).toBe('active');
  });

  it('an ECDSA key is refused before anything is sent', async () => {
    const r = await cli(['approvers', 'register', '--key', 'ec']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--key ec is an ECDSA P-256 key: approvals are signed with Ed25519 keys only');
    expect(posts).toEqual([]);
  });

  it('a revoked credential is listed as such', async () => {
    const reg = await cli(['approvers', 'register', '--key', 'bob', '--json']);
    expect(reg.status).toBe(0);
    const id = (JSON.parse(reg.stdout) as { id: string }).id;
    const rev = await cli(['approvers', 'revoke', id]);
    expect(rev.status).toBe(0);
    expect(rev.stdout).toContain(`credential ${id}: revoked`);
    const list = await cli(['approvers', 'list', '--status', 'revoked', '--json']);
    expect((JSON.parse(list.stdout) as { items: { id: string }[] }).items.map((x) => x.id)).toEqual([id]);
  });
});

describe('approvals', () => {
  it('list shows the pending requests as a table', async () => {
    const r = addRequest();
    const done = addRequest({ status: 'approved' });
    const out = await cli(['approvals', 'list']);
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(/^ID\s+STATUS\s+PARTY\s+SUMMARY\s+EXPIRES/);
    const line = out.stdout.split('\n').find((l) => l.startsWith(r.id));
    expect(line).toContain('pending');
    expect(line).toContain('alice::1220aaaa');
    expect(line).toContain('transfer alice::1220aaaa → bob::1220bbbb, 1500.0000000000 Amulet');
    expect(line).toContain(r.statement.expiresAt);
    expect(out.stdout).not.toContain(done.id);
  });

  it('approve shows the summary, signs the approval message and posts it; the server verifies it', async () => {
    const r = addRequest();
    const out = await cli(['approvals', 'approve', r.id, '--key', 'alice']);
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    for (const text of [
      `approval request ${r.id} (pending)`,
      'party:       alice::1220aaaa',
      'entry point: withdrawal',
      'action:      transfer alice::1220aaaa → bob::1220bbbb, 1500.0000000000 Amulet (admin dso::1220cccc), memo "invoice 42"',
      'requester:   ops-bot',
      `policy:      version 3 (sha256 ${'ab'.repeat(32)}), rule large-needs-two`,
      'requires:    2 of treasury',
      `expires:     ${r.statement.expiresAt} (in 23 h 59 min)`,
      `statement:   ${r.servedHash}`,
      `approved (signed): request ${r.id} is now pending, still missing 1 of treasury`,
    ])
      expect(out.stdout).toContain(text);
    const [post] = postsTo(`/v1/approvals/${r.id}/approve`);
    expect(post?.verified).toBe(true);
    expect(post?.body.statementHash).toBe(statementHash(r.statement));
    const active = [...credentials.values()].find((c) => c.publicKey === alicePublicKey);
    expect(post?.body.credentialId).toBe(active?.id);
    expect(r.approvals).toHaveLength(1);
  });

  it('approve --json prints one JSON document with the outcome', async () => {
    const r = addRequest();
    const out = await cli(['approvals', 'approve', r.id, '--key', 'alice', '--json']);
    expect(out.status).toBe(0);
    const j = JSON.parse(out.stdout) as {
      decision: string;
      signed: boolean;
      statementHash: string;
      request: { id: string };
    };
    expect(j).toMatchObject({
      decision: 'approve',
      signed: true,
      statementHash: r.servedHash,
      request: { id: r.id },
    });
  });

  it('a served statement that does not hash to the served hash is refused, nothing signed or sent', async () => {
    const r = addRequest();
    // the server shows a smaller amount than the statement the hash names
    const shown = structuredClone(r.statement);
    (shown.actions[0] as { amount: string }).amount = '15.0000000000';
    r.servedHash = statementHash(r.statement);
    r.statement = shown;
    const out = await cli(['approvals', 'approve', r.id, '--key', 'alice']);
    expect(out.status).toBe(1);
    expect(out.stderr).toContain(`served approval request ${r.id} with statement hash ${r.servedHash}`);
    expect(out.stderr).toContain(`its statement hashes to ${statementHash(shown)}`);
    expect(out.stderr).toContain('refused, nothing signed');
    expect(out.stdout).toBe('');
    expect(posts).toEqual([]);
    const show = await cli(['approvals', 'show', r.id]);
    expect(show.status).toBe(1);
    expect(show.stdout).toBe('');
  });

  it('a statement of another request is refused', async () => {
    const r = addRequest();
    r.statement = statement(randomUUID());
    r.servedHash = statementHash(r.statement);
    const out = await cli(['approvals', 'approve', r.id, '--key', 'alice']);
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('with the statement of another request');
    expect(posts).toEqual([]);
  });

  it('a statement this CLI cannot read is refused, not half shown', async () => {
    const r = addRequest();
    (r.statement.actions[0] as unknown as { amount: number }).amount = 1500;
    r.servedHash = statementHash(r.statement);
    const out = await cli(['approvals', 'approve', r.id, '--key', 'alice']);
    expect(out.status).toBe(1);
    expect(out.stderr).toContain(`served approval request ${r.id} without a readable approval statement`);
    expect(out.stdout).toBe('');
    expect(posts).toEqual([]);
  });

  it('an expired or decided request is shown, then refused', async () => {
    const expired = addRequest({ statement: { expiresAt: new Date(Date.now() - HOUR).toISOString() } });
    const out = await cli(['approvals', 'approve', expired.id, '--key', 'alice']);
    expect(out.status).toBe(1);
    expect(out.stdout).toContain(`approval request ${expired.id}`);
    expect(out.stdout).toContain('(expired)');
    expect(out.stderr).toContain(`approval request ${expired.id} expired at ${expired.statement.expiresAt}`);
    const decided = addRequest({ status: 'approved' });
    const d = await cli(['approvals', 'approve', decided.id, '--key', 'alice']);
    expect(d.status).toBe(1);
    expect(d.stderr).toContain(`approval request ${decided.id} is approved, not pending`);
    expect(posts).toEqual([]);
  });

  it('an ECDSA key is refused before the request is fetched', async () => {
    const r = addRequest();
    const out = await cli(['approvals', 'approve', r.id, '--key', 'ec']);
    expect(out.status).toBe(2);
    expect(out.stderr).toContain('approvals are signed with Ed25519 keys only');
    expect(gets).toBe(0);
    expect(posts).toEqual([]);
  });

  it('a key with no active credential is refused with what to do', async () => {
    const r = addRequest();
    const out = await cli(['approvals', 'approve', r.id, '--key', 'bob']);
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('the credential of key bob was revoked');
    expect(posts).toEqual([]);
    await signer.generate({ label: 'carol', scheme: 'ed25519', backend: 'file' });
    const c = await cli(['approvals', 'approve', r.id, '--key', 'carol']);
    expect(c.status).toBe(1);
    expect(c.stderr).toContain('key carol is not registered as your approver credential');
    expect(c.stderr).toContain('canton-signer approvers register --key carol');
  });

  it('a signature with another credential than the key’s is refused by the server (exit 1)', async () => {
    const r = addRequest();
    const bob = [...credentials.values()].find((c) => c.publicKey !== alicePublicKey) as Credential;
    bob.status = 'active';
    try {
      const out = await cli(['approvals', 'approve', r.id, '--key', 'alice', '--credential', bob.id]);
      expect(out.status).toBe(1);
      expect(out.stderr).toContain('refused (bad_signature): the signature does not verify');
      expect(postsTo(`/v1/approvals/${r.id}/approve`)[0]?.verified).toBe(false);
    } finally {
      bob.status = 'revoked';
    }
  });

  it('reject signs the reject message when a key is given, and sends the reason alone without one', async () => {
    const signed = addRequest();
    const a = await cli(['approvals', 'reject', signed.id, '--reason', 'unknown receiver', '--key', 'alice']);
    expect(a.stderr).toBe('');
    expect(a.status).toBe(0);
    expect(a.stdout).toContain(`rejected (signed): request ${signed.id} is now rejected`);
    const [p] = postsTo(`/v1/approvals/${signed.id}/reject`);
    expect(p?.verified).toBe(true);
    expect(p?.body).toMatchObject({ reason: 'unknown receiver', statementHash: signed.servedHash });

    const plain = addRequest();
    const b = await cli(['approvals', 'reject', plain.id, '--reason', 'not today']);
    expect(b.status).toBe(0);
    const [q] = postsTo(`/v1/approvals/${plain.id}/reject`);
    expect(q?.body).toEqual({ reason: 'not today', statementHash: plain.servedHash });
  });

  it('reject needs a reason (usage)', async () => {
    const r = addRequest();
    const out = await cli(['approvals', 'reject', r.id]);
    expect(out.status).toBe(2);
    expect(out.stderr).toContain("required option '--reason <text>' not specified");
    expect(posts).toEqual([]);
  });

  it('control characters of the statement are shown escaped', async () => {
    const r = addRequest({ memo: 'ok\u001b[2K\rparty: mallory\u202e' });
    const out = await cli(['approvals', 'show', r.id]);
    expect(out.status).toBe(0);
    expect(out.stdout).toContain('memo "ok\\u{1b}[2K\\u{d}party: mallory\\u{202e}"');
    expect(out.stdout).not.toContain('\u001b');
  });

  it('show --json prints the request', async () => {
    const r = addRequest();
    const out = await cli(['approvals', 'show', r.id, '--json']);
    expect(out.status).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({ id: r.id, statementHash: r.servedHash });
  });
});

describe('usage and connection', () => {
  it('no token: exit 2 naming the variable, nothing requested', async () => {
    const noToken = { ...env };
    delete noToken.CANTON_SIGNER_TOKEN;
    const out = await cli(['approvals', 'list'], { env: noToken });
    expect(out.status).toBe(2);
    expect(out.stderr).toContain('no bearer token: set $CANTON_SIGNER_TOKEN');
    expect(gets).toBe(0);
  });

  it('a token is not taken from the command line', async () => {
    const out = await cli(['approvals', 'list', '--token', TOKEN]);
    expect(out.status).toBe(2);
    expect(out.stderr).toContain("unknown option '--token'");
  });

  it('a wrong token: the service refuses, exit 1, the token not shown', async () => {
    const out = await cli(['approvals', 'list'], {
      env: { ...env, CANTON_SIGNER_TOKEN: 'wrong-token-value' },
    });
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('refused (unauthorized)');
    expect(out.stderr).not.toContain('wrong-token-value');
  });

  it('a request id that is not a UUID is a usage error', async () => {
    const out = await cli(['approvals', 'approve', 'abc', '--key', 'alice']);
    expect(out.status).toBe(2);
    expect(out.stderr).toContain('the request id: not an id (a UUID): abc');
  });

  it('a service that does not answer: exit 1 with what to do', async () => {
    // a port that was free a moment ago: nothing listens there
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const out = await cli(['approvals', 'list', '--url', `http://127.0.0.1:${port}`]);
    expect(out.status).toBe(1);
    expect(out.stderr).toContain(`cannot reach the service at http://127.0.0.1:${port} (GET /v1/approvals)`);
    expect(out.stderr).toContain('ECONNREFUSED');
  });
});
