/** `canton-signer inspect`: what a prepared transaction would authorise, for a person or a script. */
import type { Command } from 'commander';
import { decodePreparedTransaction } from '../hashing/decode.js';
import type { HashingScheme } from '../hashing/transaction-hash.js';
import { inspectTransaction, renderInspectText } from '../intent/inspect.js';
import { type InputFormat, withTransaction } from './input.js';
import { inputFormatOption, schemeOption } from './options.js';

export function registerInspect(program: Command): void {
  program
    .command('inspect')
    .description('Show every node, the metadata, what the scheme covers, and the hash')
    .argument(
      '[file]',
      'file with the prepared transaction (base64, raw protobuf or JSON); "-" or absent: stdin',
    )
    .addOption(schemeOption())
    .option('--json', 'print the stable JSON document (docs/inspect-json.md) instead of text')
    .addOption(inputFormatOption())
    .action(
      async (
        file: string | undefined,
        opts: { scheme: HashingScheme; json?: boolean; input: InputFormat },
      ) => {
        const report = await withTransaction(file, opts.input, (bytes) =>
          inspectTransaction(decodePreparedTransaction(bytes), opts.scheme),
        );
        process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : renderInspectText(report));
      },
    );
}
