import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two files at a time on CI's two cores: most files wait on child processes and sockets, so
    // the second one fills the time the first spends waiting (one at a time took 690 s).
    maxWorkers: 2,
  },
});
