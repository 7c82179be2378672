/** `canton-signer hash`: the prepared-transaction hash, nothing else on stdout. */
import type { Command } from 'commander';
import { TransactionError } from '../hashing/errors.js';
import { bytesToHex, parseHash } from '../hashing/input.js';
import { type HashingScheme, hashPreparedTransaction } from '../hashing/transaction-hash.js';
import { type InputFormat, UsageError, withTransaction } from './input.js';
import { CliExit, inputFormatOption, schemeOption } from './options.js';

export function registerHash(program: Command): void {
  program
    .command('hash')
    .description('Recompute the hash of a prepared transaction (64 lowercase hex characters)')
    .argument(
      '[file]',
      'file with the prepared transaction (base64, raw protobuf or JSON); "-" or absent: stdin',
    )
    .addOption(schemeOption())
    .option('--expect <hash>', 'expected hash (hex or base64): exit 1 if it differs')
    .option('--require-signed-max-record-time', 'refuse unless the scheme covers max_record_time (V3)')
    .addOption(inputFormatOption())
    .action(
      async (
        file: string | undefined,
        opts: {
          scheme: HashingScheme;
          expect?: string;
          requireSignedMaxRecordTime?: boolean;
          input: InputFormat;
        },
      ) => {
        let expected: Uint8Array | undefined;
        if (opts.expect !== undefined) {
          try {
            expected = parseHash(opts.expect, '--expect');
          } catch (e) {
            throw new UsageError(e instanceof TransactionError ? e.detail : String(e));
          }
        }
        const hash = await withTransaction(file, opts.input, (bytes) =>
          hashPreparedTransaction(bytes, {
            scheme: opts.scheme,
            requireMaxRecordTimeSigned: opts.requireSignedMaxRecordTime === true,
          }),
        );
        const hex = bytesToHex(hash);
        if (expected !== undefined && bytesToHex(expected) !== hex)
          throw new CliExit(
            1,
            `hash mismatch: computed ${hex} (${opts.scheme.toUpperCase()}), expected ${bytesToHex(expected)}`,
          );
        process.stdout.write(`${hex}\n`);
      },
    );
}
