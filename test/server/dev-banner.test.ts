/**
 * `npm start` as a person runs it (`serve --dev` in a fresh folder, the
 * default log level): the banner is not interleaved with JSON log lines, and
 * every command it prints runs as printed in a shell — the token export, the
 * withdrawal `curl`, the listing `curl`, the demo deposit to alice from a
 * sandbox customer (`npx canton-signer sandbox deposit`, finding the sandbox
 * by itself, and its `curl` form), the deposits list showing both credited
 * to customer account 1001 — and does what the banner says.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN } from '../support/cli.js';
import { devEnv, type ServeProcess, startServe, stopAll } from '../support/serve-process.js';

let cwd: string;
let p: ServeProcess;
let banner: string;

/** The banner's commands: lines indented by two spaces starting with `export`, `curl` or `npx`, with their continuations. */
function bannerCommands(text: string): string[] {
  const out: string[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!/^ {2}(export|curl|npx) /.test(lines[i]!)) continue;
    let cmd = lines[i]!;
    while (cmd.endsWith('\\') && i + 1 < lines.length) cmd += `\n${lines[++i]!}`;
    out.push(cmd.trim());
  }
  return out;
}

beforeAll(async () => {
  cwd = await mkdtemp(join(tmpdir(), 'canton-signer-dev-banner-'));
  p = startServe(['--dev'], {
    cwd,
    env: devEnv({ CANTON_SIGNER_LOG_LEVEL: undefined }),
  });
  await p.waitFor(/See it credited[^\n]*\n[^\n]*\n/, 120_000);
  banner = p.stdout();
}, 150_000);

afterAll(async () => {
  stopAll();
  if (cwd) await rm(cwd, { recursive: true, force: true });
});

describe('the npm start banner', () => {
  it('is not interleaved with JSON log lines', () => {
    expect(banner).toMatch(/canton-signer is running \(development mode\)/);
    expect(banner).not.toMatch(/^\{"level"/m);
    expect(banner).toMatch(/ logs +warnings and errors only/);
  });

  it('every command it prints runs as printed: a withdrawal alice → bob is created and listed', () => {
    const commands = bannerCommands(banner);
    expect(commands.map((c) => c.split(' ')[0])).toEqual(['export', 'curl', 'curl', 'npx', 'curl', 'curl']);
    const SEP = '----- next command -----';
    // `npx canton-signer` as in a clone: this checkout's bin (the temp folder has no node_modules).
    const run = (c: string) => c.replace(/^npx canton-signer /, `node ${JSON.stringify(BIN)} `);
    const script = ['set -e', ...commands.flatMap((c) => [run(c), `echo; echo '${SEP}'`])].join('\n');
    const r = spawnSync('bash', ['-c', script], { cwd, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const outputs = r.stdout.split(SEP).map((s) => s.trim());
    const created = JSON.parse(outputs[1]!) as { id: string; state: string; amount: string; party: string };
    expect(created.state, outputs[1]).toBe('received');
    expect(created.amount).toBe('10');
    expect(banner).toContain(`alice      ${created.party}`);
    const listed = JSON.parse(outputs[2]!) as { items: { id: string }[] };
    expect(
      listed.items.map((w) => w.id),
      outputs[2],
    ).toContain(created.id);
    const alice = /alice +(\S+)/.exec(banner)![1];
    // alice has a transfer preapproval: a deposit to her is one step, credited at once.
    expect(outputs[3]).toMatch(
      new RegExp(`^deposited 25 CC from customer::\\S+ to ${alice} \\(one-step, memo acct-1001`),
    );
    const deposit = JSON.parse(outputs[4]!) as {
      receiver: string;
      memo: string;
      amount: string;
      updateId: string;
    };
    expect([deposit.receiver, deposit.memo, deposit.amount]).toEqual([alice, 'acct-1001', '25']);
    // The deposits list, run again until ingestion has read both deposits: credited to account 1001.
    type Listed = { items: { account?: string; state: string; amount: string }[] };
    expect(Array.isArray((JSON.parse(outputs[5]!) as Listed).items), outputs[5]).toBe(true);
    const again = [commands[0]!, commands[5]!].join('\n');
    let listed2: Listed = { items: [] };
    for (let i = 0; i < 50 && listed2.items.length < 2; i++) {
      const l = spawnSync('bash', ['-c', again], { cwd, encoding: 'utf8', timeout: 30_000 });
      listed2 = JSON.parse(l.stdout) as Listed;
      if (listed2.items.length < 2) spawnSync('sleep', ['0.2']);
    }
    expect(listed2.items.map((d) => [d.account, d.state, d.amount])).toEqual([
      ['1001', 'credited', '25.0000000000'],
      ['1001', 'credited', '25.0000000000'],
    ]);
  });
});
