/**
 * A Canton service refusing the credentials the CLI presents (the token's
 * user lacks the rights) is reported as what it is: one line naming the
 * service, the status and the code, and the next step (check the token's
 * rights) — not as a refusal of the request. The compiled command against an
 * in-process sandbox whose token is bound to a user without rights.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { runCli } from '../support/cli.js';

const TOKEN = 'cli-upstream-token-not-printed';
let sb: RunningSandbox;

beforeAll(async () => {
  sb = await startSandbox({
    seed: 'cli-upstream',
    timers: false,
    auth: { tokens: { [TOKEN]: 'no-rights' } },
  });
  sb.ctx.net.addUser('no-rights', undefined, false);
}, 60_000);
afterAll(async () => sb?.close());

describe('an upstream 403 in the CLI', () => {
  it('names the service, status and code, and says to check the token rights; exit 1', async () => {
    const party = sb.ctx.net.validatorParty;
    const r = await runCli(['holdings', 'list', party, '--sandbox', sb.urls.origin], {
      env: { PATH: process.env.PATH ?? '', CANTON_SIGNER_LEDGER_API_TOKEN: TOKEN },
    });
    expect(r.status, r.stderr).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^canton-signer: the participant's Ledger API \(ledger-api\) answered \S+ \S+ with status 403, code PERMISSION_DENIED: .*may not read as .* — the token this signer uses for ledger-api is refused: check that it is valid and that its user has the rights/,
    );
    expect(r.stderr).not.toContain(TOKEN);
  });
});
