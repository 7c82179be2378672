// Copies the console's static files (HTML, CSS, images) next to its compiled modules in
// dist/console/web; `tsc -p tsconfig.console.json` writes the modules themselves.
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { extname, join } from 'node:path';

const from = 'src/console/web';
const to = 'dist/console/web';
mkdirSync(to, { recursive: true });
for (const name of readdirSync(from))
  if (['.html', '.css', '.svg', '.png'].includes(extname(name)))
    copyFileSync(join(from, name), join(to, name));
