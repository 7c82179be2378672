#!/usr/bin/env node
// Entry point of the `canton-signer` command (compiled code lives in dist/).
import { main } from '../dist/cli/main.js';

process.exitCode = await main(process.argv);
