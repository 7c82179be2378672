/**
 * `npm start` as a person runs it (`serve --dev` in a fresh folder, the
 * default log level): the banner is not interleaved with JSON log lines, and
 * every command it prints runs as printed in a shell — the token export, the
 * withdrawal `curl`, the listing `curl` — and does what the banner says.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devEnv, type ServeProcess, startServe, stopAll } from '../support/serve-process.js';

let cwd: string;
let p: ServeProcess;
let banner: string;

/** The banner's commands: lines indented by two spaces starting with `export` or `curl`, with their continuations. */
function bannerCommands(text: string): string[] {
  const out: string[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!/^ {2}(export|curl) /.test(lines[i]!)) continue;
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
  await p.waitFor(/List it and the others[^\n]*\n[^\n]*\n/, 120_000);
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
    expect(commands.map((c) => c.split(' ')[0])).toEqual(['export', 'curl', 'curl']);
    const SEP = '----- next command -----';
    const script = ['set -e', ...commands.flatMap((c) => [c, `echo; echo '${SEP}'`])].join('\n');
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
  });
});
