/**
 * Layering of src/: lower layers never import higher ones. Checked here for
 * the bottom layer: nothing in src/hashing imports a module outside
 * src/hashing (Node's own modules aside), so the verification core can be
 * read, reviewed and reused on its own.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));

/** Every module specifier in a TypeScript source: static imports and re-exports, dynamic imports. */
function specifiers(source: string): string[] {
  const out: string[] = [];
  const patterns = [
    /^\s*(?:import|export)\s[^;]*?\sfrom\s*['"]([^'"]+)['"]/gms,
    /^\s*import\s*['"]([^'"]+)['"]/gm,
    /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const re of patterns) for (const m of source.matchAll(re)) out.push(m[1]!);
  return out;
}

/** The imports of the .ts files under `dir` that leave `dir` (other than `node:` built-ins). */
function leaving(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const file = join(entry.parentPath, entry.name);
    for (const spec of specifiers(readFileSync(file, 'utf8'))) {
      if (spec.startsWith('node:')) continue;
      const inside = spec.startsWith('.') && !relative(dir, resolve(dirname(file), spec)).startsWith('..');
      if (!inside) found.push(`${relative(SRC, file)} imports ${spec}`);
    }
  }
  return found;
}

describe('layering', () => {
  it('src/hashing imports nothing outside src/hashing', () => {
    expect(leaving(join(SRC, 'hashing'))).toEqual([]);
  });

  it('the scan sees every kind of import (so that the check above can fail)', () => {
    const src = [
      "import { a } from '../intent/x.js';",
      "import type {\n  B,\n} from './y.js';",
      "export { c } from '../keys/z.js';",
      "import 'side-effect';",
      "const m = await import('../server/w.js');",
    ].join('\n');
    expect(specifiers(src).sort()).toEqual(
      ['../intent/x.js', './y.js', '../keys/z.js', 'side-effect', '../server/w.js'].sort(),
    );
  });
});
