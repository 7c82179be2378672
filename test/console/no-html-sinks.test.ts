/**
 * The console's browser code never parses text as HTML: no innerHTML,
 * outerHTML, insertAdjacentHTML, document.write, eval or string timers in
 * src/console/web. Every value from the ledger or a caller (memos, names,
 * labels, policy documents) reaches the page through dom.ts's text nodes;
 * this keeps it so as the code grows.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/cli.js';

const WEB = join(ROOT, 'src/console/web');
const SINKS =
  /\b(innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\s*\(|new Function\s*\(|set(Timeout|Interval)\s*\(\s*['"`])/;

describe('the console code', () => {
  it('has no HTML or code sinks', () => {
    const files = readdirSync(WEB).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(5);
    const found = files.flatMap((f) =>
      readFileSync(join(WEB, f), 'utf8')
        .split('\n')
        .map((line, i) => ({ where: `${f}:${i + 1}`, line }))
        .filter(({ line }) => SINKS.test(line) && !line.trim().startsWith('*')),
    );
    expect(found).toEqual([]);
  });

  it('the page loads only its own modules and no inline script or style', () => {
    const html = readFileSync(join(WEB, 'index.html'), 'utf8');
    expect(html).not.toMatch(/<script(?![^>]*\bsrc="\/console\/)/);
    expect(html).not.toMatch(/\sstyle=|<style/);
    expect(html).not.toMatch(/https?:\/\//);
  });
});
