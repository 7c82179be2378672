/**
 * `canton-signer policy check FILE`: reads a policy document as the service
 * would load it and says what it contains (version SHA-256, rules, limits,
 * approver groups), or names each problem with its line, column and field
 * (exit 1). Nothing is contacted.
 */
import type { Command } from 'commander';
import type { readPolicyFile } from '../policy/document.js';
import { CliExit } from './options.js';
import { out } from './output.js';

export function registerPolicy(program: Command): void {
  const policy = program.command('policy').description('Policy documents (docs/policy.md)');
  policy
    .command('check')
    .description('Check a policy document (YAML or JSON) as the service would load it')
    .argument('<file>', 'the policy document')
    .option('--json', 'print the result as JSON')
    .action(async (file: string, opts: { json?: boolean }) => {
      // loaded here: the other commands (and the help) need no YAML parser or policy schema
      const { PolicyError, readPolicyFile } = await import('../policy/document.js');
      let loaded: Awaited<ReturnType<typeof readPolicyFile>>;
      try {
        loaded = await readPolicyFile(file);
      } catch (e) {
        if (e instanceof PolicyError) {
          if (opts.json) out(true, { ok: false, problems: e.problems }, '');
          throw new CliExit(1, e.message);
        }
        throw e;
      }
      const { doc } = loaded;
      const groups = Object.entries(doc.approverGroups ?? {});
      const text = [
        `${file}: a valid policy (format ${doc.version}${doc.name ? `, "${doc.name}"` : ''})`,
        `sha256   ${loaded.sha256}`,
        `timezone ${doc.timezone}; when no rule matches: ${doc.default}`,
        `rules    ${doc.rules.map((r) => `${r.id} (${r.decision})`).join(', ')}`,
        `limits   ${(doc.limits ?? []).map((l) => `${l.id} (${l.window})`).join(', ') || 'none'}`,
        `approver groups ${groups.map(([g, m]) => `${g} (${m.length})`).join(', ') || 'none'}`,
        '',
      ].join('\n');
      out(
        opts.json,
        {
          ok: true,
          sha256: loaded.sha256,
          format: loaded.format,
          rules: doc.rules.map((r) => ({ id: r.id, decision: r.decision })),
          limits: (doc.limits ?? []).map((l) => ({ id: l.id, window: l.window })),
          approverGroups: Object.fromEntries(groups.map(([g, m]) => [g, m.length])),
        },
        text,
      );
    });
}
