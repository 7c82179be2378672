/**
 * The files vitest runs in one shared process per worker (vitest.config.ts) must not leave state
 * that changes what the next file sees: no module mocks, no stubbed environment or globals, no fake
 * timers, no change of directory, no child processes, no V8 flags. A listed file that starts doing any of this
 * fails here and belongs in the isolated project instead.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SHARED_PROCESS_FILES } from '../vitest.config.js';

const ROOT = join(import.meta.dirname, '..');

/** What a file may not do when the next file in the same process must not notice it. */
const FORBIDDEN: readonly [RegExp, string][] = [
  [/\bvi\.(mock|doMock|hoisted|stubEnv|stubGlobal|useFakeTimers|spyOn)\b/, 'mocks, stubs or fake timers'],
  [/process\.env(\.[A-Za-z_]+|\[[^\]]+\])\s*=[^=]/, 'assigns an environment variable'],
  [/\bdelete process\.env\b/, 'removes an environment variable'],
  [/process\.chdir\(/, 'changes directory'],
  [/(?<![.\w])(spawn|spawnSync|execFile|execFileSync|fork|exec|execSync)\(/, 'starts a child process'],
  [/globalThis\.[A-Za-z_$]+\s*=[^=]/, 'assigns a global'],
  [/\bsetFlagsFromString\(/, 'changes V8 flags'],
];

describe('files sharing a process', () => {
  it.each(SHARED_PROCESS_FILES)('%s leaves nothing behind for the next file', (file) => {
    const path = join(ROOT, file);
    expect(existsSync(path), `${file} is listed but does not exist`).toBe(true);
    const text = readFileSync(path, 'utf8');
    for (const [pattern, what] of FORBIDDEN)
      expect(pattern.test(text), `${file} ${what}: move it out of SHARED_PROCESS_FILES`).toBe(false);
  });

  it('lists each file once', () => {
    expect(new Set(SHARED_PROCESS_FILES).size).toBe(SHARED_PROCESS_FILES.length);
  });
});
