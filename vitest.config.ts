import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Files that share one process per worker (`isolate: false`): they start no child process, mock no
 * module, stub no environment variable or global and use no fake timers, so what one leaves behind
 * cannot change what the next one sees. Loading the project's modules once per worker instead of
 * once per file saves about a fifth of these files' CPU (import time 33 → 13 s, measured on 50
 * files). test/shared-process.test.ts keeps the list honest; a file not listed runs isolated.
 */
export const SHARED_PROCESS_FILES = [
  'test/canonical-fast.test.ts',
  'test/canton-hash.test.ts',
  'test/canton/ans-rules.test.ts',
  'test/canton/ledger-api.test.ts',
  'test/canton/openapi.test.ts',
  'test/canton/scan.test.ts',
  'test/canton/topology.test.ts',
  'test/canton/validator.test.ts',
  'test/console/dev-signin-and-key-reuse.test.ts',
  'test/console/diff.test.ts',
  'test/differential.test.ts',
  'test/exchange/decide.test.ts',
  'test/exchange/parse.test.ts',
  'test/exchange/resume-point.test.ts',
  'test/flows/completion-scan.test.ts',
  'test/flows/names-lifecycle.test.ts',
  'test/flows/submission-window.test.ts',
  'test/flows/window.test.ts',
  'test/flows/withdrawal-lifecycle.test.ts',
  'test/fuzz.test.ts',
  'test/hashing-sink.test.ts',
  'test/hashing-wire-writer.test.ts',
  'test/hashing/canton-parity.test.ts',
  'test/hashing/streaming.test.ts',
  'test/hostile.test.ts',
  'test/inspect.test.ts',
  'test/keys/schemes-verify.test.ts',
  'test/keys/signer-instances.test.ts',
  'test/layering.test.ts',
  'test/offline/air-gap-security.test.ts',
  'test/offline/qr-limits.test.ts',
  'test/offline/qr.test.ts',
  'test/package.test.ts',
  'test/policy/approval.test.ts',
  'test/policy/attacks.test.ts',
  'test/policy/engine-start.test.ts',
  'test/policy/evaluate.test.ts',
  'test/policy/webauthn.test.ts',
  'test/refusals.test.ts',
  'test/server/air-gap.test.ts',
  'test/server/metrics.test.ts',
  'test/server/roles-matrix.test.ts',
  'test/server/sign-approval-reuse.test.ts',
  'test/store/approvals.test.ts',
  'test/store/policy.test.ts',
  'test/store/repos.test.ts',
  'test/store/round-trips.test.ts',
  'test/store/withdrawals.test.ts',
  'test/text/english.test.ts',
  'test/vectors.test.ts',
];

const common = {
  testTimeout: 60_000,
  hookTimeout: 60_000,
  pool: 'forks' as const,
};

export default defineConfig({
  test: {
    // Two files at a time on CI's two cores: most files wait on child processes and sockets, so
    // the second one fills the time the first spends waiting (one at a time took 690 s).
    maxWorkers: 2,
    projects: [
      {
        test: {
          ...common,
          name: 'shared',
          include: SHARED_PROCESS_FILES,
          isolate: false,
        },
      },
      {
        test: {
          ...common,
          name: 'isolated',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...SHARED_PROCESS_FILES],
        },
      },
    ],
  },
});
