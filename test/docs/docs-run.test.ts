/**
 * The docs are executable: every fenced `sh`/`bash` block of README.md and
 * docs/*.md runs, so a documented command that breaks fails the build.
 *
 * The convention (also in CONTRIBUTING.md, "The docs are tested"):
 * - The blocks of one file run in order as one bash script (`set -eo pipefail`), so a
 *   later block may use what an earlier one made (files, exported variables, a
 *   sandbox started in the background). A failing command fails the file and the
 *   report names the block's line.
 * - Each file runs in its own fresh temporary folder holding a copy of what a
 *   clone ships for the docs to use (`canton-signer.example.yaml`, `examples/`),
 *   with `canton-signer` and `npx canton-signer` meaning this checkout's bin (an
 *   `npx` of anything else fails: no network), no CANTON_SIGNER_* variable from the
 *   caller, and its own free ports: the sandbox's default port 7575
 *   (CANTON_SIGNER_SANDBOX_PORT) and the service's 8080 (CANTON_SIGNER_PORT) are
 *   replaced by free ones, in URLs of the text too (at 127.0.0.1 or localhost).
 * - A block that is not meant to be run as written (an output sample, a synopsis
 *   with placeholders, a command that needs what CI cannot have: a hardware HSM,
 *   a real network, a second machine) has a marker on the line before its fence:
 *   `<!-- docs-run: skip (why) -->`. A block that fails because of a known bug
 *   being fixed elsewhere has `<!-- docs-run: known-broken (area: what fails) -->`:
 *   skipped, and listed loudly. A marker without a reason fails the test.
 * - A block that needs a system tool the project's CI installs (SoftHSM2) has
 *   `<!-- docs-run: needs (softhsm2-util) -->`: it runs where the tool is on the
 *   PATH, and always in CI (CI set: a missing tool fails there); elsewhere it is
 *   skipped with a warning, as the HSM tests are.
 * - Whatever a script started is killed at its end (its whole process group).
 * - README.md's folder is exactly a fresh clone's: its quick start makes the embedded
 *   database. The folder of another file that starts the service also holds one already
 *   made (`./data` and `./dev/data`, what `serve` and `serve --dev` open by default, as
 *   after a first start): creating it (PGlite's initdb) costs 5–15 s of CPU per service
 *   started, and the first start on an empty folder is what README.md's run (and
 *   test/server) check.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { chmod, cp, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN, ROOT } from '../support/cli.js';
import { seedPgliteDir } from '../support/pg.js';

interface DocBlock {
  /** 1-based line of the opening fence. */
  line: number;
  code: string;
  marker?: { kind: 'skip' | 'known-broken' | 'needs'; reason: string };
}

const FENCE = /^(\s*)(`{3,})(\S*)\s*$/;
const MARKER = /^\s*<!--\s*docs-run:\s*([a-z-]+)\s*(?:\((.*)\))?\s*-->\s*$/;
const SHELL = new Set(['sh', 'bash', 'shell']);

/** The shell blocks of a markdown text, with the marker before each (if any). */
function shellBlocks(markdown: string, file: string): DocBlock[] {
  const lines = markdown.split('\n');
  const blocks: DocBlock[] = [];
  let lastNonBlank = '';
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]!);
    if (!open) {
      if (lines[i]!.trim() !== '') lastNonBlank = lines[i]!;
      continue;
    }
    const [, indent, ticks, lang] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const close = FENCE.exec(lines[j]!);
      if (close && close[2]!.length >= ticks!.length && close[3] === '') break;
      body.push(lines[j]!.startsWith(indent!) ? lines[j]!.slice(indent!.length) : lines[j]!);
    }
    if (SHELL.has(lang!)) {
      const block: DocBlock = { line: i + 1, code: body.join('\n') };
      const m = MARKER.exec(lastNonBlank);
      if (m) {
        const kind = m[1];
        const reason = (m[2] ?? '').trim();
        if (kind !== 'skip' && kind !== 'known-broken' && kind !== 'needs')
          throw new Error(`${file}:${i}: unknown docs-run marker "${kind}" (skip, known-broken or needs)`);
        if (reason === '') throw new Error(`${file}:${i}: docs-run marker "${kind}" without a reason in (…)`);
        block.marker = { kind, reason };
      }
      blocks.push(block);
    } else if (MARKER.test(lastNonBlank)) {
      throw new Error(`${file}:${i}: a docs-run marker before a block that is not sh/bash`);
    }
    lastNonBlank = '';
    i = j;
  }
  return blocks;
}

/** Whether `command` is an executable file in one of PATH's folders. */
function onPath(command: string, path: string): boolean {
  return path.split(':').some((d) => {
    try {
      accessSync(join(d, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** The tools a `needs` block lacks here; none in CI, where a missing tool must fail the block. */
function missingTools(b: DocBlock, env: NodeJS.ProcessEnv): string[] {
  if (b.marker?.kind !== 'needs' || env.CI) return [];
  return b.marker.reason.split(/[\s,]+/).filter((t) => t !== '' && !onPath(t, env.PATH ?? ''));
}

/** A block runs unless it is marked skip or known-broken, or needs a tool this machine lacks. */
const runs = (b: DocBlock, env: NodeJS.ProcessEnv = process.env): boolean =>
  (!b.marker || b.marker.kind === 'needs') && missingTools(b, env).length === 0;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** README.md and docs/*.md; DOCS_RUN_ONLY=file,… runs only those (when working on one). */
const DOC_FILES = async () => {
  const all = [
    'README.md',
    ...(await readdir(join(ROOT, 'docs')))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `docs/${f}`),
  ];
  const only = process.env.DOCS_RUN_ONLY?.split(',').filter((f) => f !== '');
  return only ? all.filter((f) => only.includes(f)) : all;
};

/** The script of one file: its runnable blocks in order, each announced on stderr. */
function script(file: string, blocks: DocBlock[], ports: { sandbox: number; service: number }): string {
  const parts = ['set -eo pipefail', 'trap \'echo "docs-run: failed in the block above (exit $?)" >&2\' ERR'];
  for (const b of blocks) {
    if (!runs(b)) continue;
    const code = b.code
      .replaceAll('127.0.0.1:7575', `127.0.0.1:${ports.sandbox}`)
      .replaceAll('127.0.0.1:8080', `127.0.0.1:${ports.service}`)
      .replaceAll('localhost:8080', `localhost:${ports.service}`);
    parts.push(`echo "docs-run: ${file}:${b.line} (at \${SECONDS}s)" >&2`, code);
  }
  return `${parts.join('\n')}\n`;
}

const running = new Set<ChildProcess>();
const folders: string[] = [];
afterAll(async () => {
  for (const c of running) killGroup(c);
  for (const d of folders) await rm(d, { recursive: true, force: true });
});

function killGroup(c: ChildProcess): void {
  try {
    if (c.pid !== undefined) process.kill(-c.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** A PATH folder where `canton-signer` and `npx canton-signer` are this checkout's CLI. */
async function shims(dir: string): Promise<string> {
  const bin = join(dir, '.docs-run-bin');
  await mkdir(bin);
  await symlink(BIN, join(bin, 'canton-signer'));
  await writeFile(
    join(bin, 'npx'),
    [
      '#!/usr/bin/env bash',
      'if [ "$1" = canton-signer ]; then shift; exec canton-signer "$@"; fi',
      'echo "docs-run: npx $1 is not available here (no network); only npx canton-signer is" >&2',
      'exit 127',
      '',
    ].join('\n'),
  );
  await chmod(join(bin, 'npx'), 0o755);
  return bin;
}

/** The file whose run starts on exactly a fresh clone (no database made yet). */
const FRESH_CLONE = 'README.md';
/** A block that starts the service (which opens, or first makes, the embedded database). */
const STARTS_SERVICE = /\bcanton-signer serve\b/;

async function runFile(
  file: string,
  blocks: DocBlock[],
  opts: { seedDatabase?: boolean } = {},
): Promise<{ code: number | null; output: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'canton-signer-docs-run-'));
  folders.push(dir);
  await cp(join(ROOT, 'examples'), join(dir, 'examples'), { recursive: true });
  await cp(join(ROOT, 'canton-signer.example.yaml'), join(dir, 'canton-signer.example.yaml'));
  if (opts.seedDatabase) {
    await seedPgliteDir(join(dir, 'data'));
    await seedPgliteDir(join(dir, 'dev', 'data'));
  }
  const bin = await shims(dir);
  const ports = { sandbox: await freePort(), service: await freePort() };
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith('CANTON_SIGNER_') && k !== 'NODE_OPTIONS' && !k.startsWith('VITEST')) env[k] = v;
  env.PATH = `${bin}:${process.env.PATH ?? ''}`;
  env.CANTON_SIGNER_SANDBOX_PORT = String(ports.sandbox);
  env.CANTON_SIGNER_PORT = String(ports.service);
  await writeFile(join(dir, '.docs-run.sh'), script(file, blocks, ports));
  const child = spawn('bash', ['.docs-run.sh'], {
    cwd: dir,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let output = '';
  child.stdout!.on('data', (c: Buffer) => {
    output += c.toString('utf8');
  });
  child.stderr!.on('data', (c: Buffer) => {
    output += c.toString('utf8');
  });
  const code = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => {
      output += '\ndocs-run: timed out after 150 s\n';
      killGroup(child);
    }, 150_000);
    // 'exit', not 'close': what the script left in the background still holds its output open.
    child.on('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  // Whatever the script left in the background (a sandbox, a service) goes with its group.
  killGroup(child);
  await new Promise((r) => setTimeout(r, 100));
  running.delete(child);
  return { code, output };
}

const files = await DOC_FILES();
const parsed = await Promise.all(
  files.map(async (file) => ({ file, blocks: shellBlocks(await readFile(join(ROOT, file), 'utf8'), file) })),
);

describe('docs-run: the shell blocks of README.md and docs/*.md', () => {
  it('the harness reads blocks, indented blocks and markers; a marker needs a reason', () => {
    const md = [
      'text',
      '```sh',
      'echo one',
      '```',
      '<!-- docs-run: skip (an output sample) -->',
      '```sh',
      'echo two',
      '```',
      '1. a list',
      '   ```bash',
      '   echo three',
      '   ```',
      '```json',
      '{}',
      '```',
    ].join('\n');
    const b = shellBlocks(md, 't.md');
    expect(b.map((x) => [x.line, x.code, x.marker?.kind])).toEqual([
      [2, 'echo one', undefined],
      [6, 'echo two', 'skip'],
      [10, 'echo three', undefined],
    ]);
    expect(() => shellBlocks('<!-- docs-run: skip -->\n```sh\nx\n```', 't.md')).toThrow(/without a reason/);
    expect(() => shellBlocks('<!-- docs-run: maybe (x) -->\n```sh\nx\n```', 't.md')).toThrow(/unknown/);
    const [needs] = shellBlocks('<!-- docs-run: needs (no-such-tool-here bash) -->\n```sh\nx\n```', 't.md');
    expect(needs!.marker).toEqual({ kind: 'needs', reason: 'no-such-tool-here bash' });
    expect(missingTools(needs!, { PATH: process.env.PATH })).toEqual(['no-such-tool-here']);
    expect(runs(needs!, { PATH: process.env.PATH })).toBe(false);
    expect(runs(needs!, { PATH: process.env.PATH, CI: 'true' })).toBe(true);
    expect(runs({ ...needs!, marker: { kind: 'needs', reason: 'bash' } }, { PATH: process.env.PATH })).toBe(
      true,
    );
  });

  it('a failing block fails its file, naming the block; what a script started in the background is killed', async () => {
    const r = await runFile('self-test.md', [
      { line: 3, code: 'sleep 300 &\necho "bgpid=$!"' },
      { line: 9, code: 'false' },
      { line: 12, code: 'echo never' },
    ]);
    expect(r.code).not.toBe(0);
    expect(r.output).toContain('docs-run: self-test.md:9');
    expect(r.output).toContain('docs-run: failed in the block above');
    const pid = Number(/bgpid=(\d+)/.exec(r.output)?.[1]);
    expect(pid).toBeGreaterThan(0);
    // Gone, or a zombie waiting for whoever reaps orphans here (it runs no more).
    const state = await readFile(`/proc/${pid}/stat`, 'utf8').then(
      (t) => t.slice(t.lastIndexOf(')') + 2, t.lastIndexOf(')') + 3),
      () => 'gone',
    );
    expect(['gone', 'Z', 'X']).toContain(state);
    expect(r.output).not.toContain('never');
  });

  const known = parsed.flatMap(({ file, blocks }) =>
    blocks
      .filter((b) => b.marker?.kind === 'known-broken')
      .map((b) => `${file}:${b.line} ${b.marker!.reason}`),
  );
  if (known.length > 0)
    console.warn(`docs-run: KNOWN-BROKEN blocks, skipped until fixed:\n  ${known.join('\n  ')}`);
  const lacking = parsed.flatMap(({ file, blocks }) =>
    blocks
      .filter((b) => missingTools(b, process.env).length > 0)
      .map((b) => `${file}:${b.line} needs ${missingTools(b, process.env).join(', ')}`),
  );
  if (lacking.length > 0)
    console.warn(`docs-run: blocks skipped on this machine (they run in CI):\n  ${lacking.join('\n  ')}`);

  for (const { file, blocks } of parsed) {
    const runnable = blocks.filter((b) => runs(b));
    if (runnable.length === 0) continue;
    it.concurrent(`${file}: ${runnable.length} block(s) run as written (lines ${runnable.map((b) => b.line).join(', ')})`, async () => {
      const seedDatabase = file !== FRESH_CLONE && runnable.some((b) => STARTS_SERVICE.test(b.code));
      const r = await runFile(file, blocks, { seedDatabase });
      if (process.env.DOCS_RUN_VERBOSE) console.log(r.output);
      expect(r.code, `${file} failed:\n${r.output}`).toBe(0);
    }, 160_000);
  }
});
