/**
 * The console's page and assets, read once at start into memory: the
 * compiled browser modules and the HTML, CSS and images copied beside them by
 * the build (`npm run build` writes dist/console/web). Only files of the
 * known kinds are served, by their exact name; nothing is fetched at run time.
 */
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Asset {
  type: string;
  body: Buffer;
}

export type ConsoleAssets = ReadonlyMap<string, Asset>;

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

/** Where the built console is: next to this module (running from dist/), else the package's dist/. */
export function assetsDirectory(): string {
  const here = fileURLToPath(new URL('./web/', import.meta.url));
  if (existsSync(join(here, 'app.js'))) return here;
  const built = resolve(fileURLToPath(new URL('../../dist/console/web/', import.meta.url)));
  if (existsSync(join(built, 'app.js'))) return built;
  throw new Error(
    `the console's assets are not built (looked in ${here} and ${built}): run npm run build, or set console.enabled to false`,
  );
}

export async function loadAssets(dir = assetsDirectory()): Promise<ConsoleAssets> {
  const assets = new Map<string, Asset>();
  for (const name of await readdir(dir)) {
    const type = TYPES[extname(name)];
    if (type === undefined || !/^[a-z0-9-]+(\.[a-z0-9]+)+$/.test(name)) continue;
    assets.set(name, { type, body: await readFile(join(dir, name)) });
  }
  return assets;
}
