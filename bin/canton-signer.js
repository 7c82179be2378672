#!/usr/bin/env node
// Entry point of the `canton-signer` command (compiled code lives in dist/).
// `offline …` runs on an air-gapped machine: it loads only its own modules (no network clients, server or database).
if (process.argv[2] === 'offline') {
  const { offlineMain } = await import('../dist/cli/offline.js');
  process.exitCode = await offlineMain(process.argv);
} else {
  const { main } = await import('../dist/cli/main.js');
  process.exitCode = await main(process.argv);
}
