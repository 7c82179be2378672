/**
 * The policy where there is no service: the command line's flows (transfer,
 * send, merge, setup-accept, onboarding) run on this host with its keystore
 * and no database. The rules of the policy file decide as they would in the
 * service; what needs the service's database — limits over time, approvals
 * by people, "never paid before" — cannot be decided here, so a transaction
 * such a part of the policy applies to is refused, saying to run it through
 * the service. (Whoever holds the keystore can sign without any policy: on
 * the command line the policy guards against mistakes, not against its user.)
 */
import type { LoadedPolicy } from './document.js';
import { evaluate, namesIn, policyActions } from './evaluate.js';
import type { PolicyCaller, PolicyDecision, PolicyGate } from './hook.js';

export interface LocalGateOptions {
  /** ANS name → party (Scan); a name that does not resolve never matches. */
  resolveName?: (name: string) => Promise<string | undefined>;
  caller?: PolicyCaller;
  now?: () => Date;
}

export function localGate(p: LoadedPolicy, opts: LocalGateOptions = {}): PolicyGate {
  const ref = (rule: string) => ({ version: 0, sha256: p.sha256, rule });
  return {
    async decide(req): Promise<PolicyDecision> {
      const names = new Map<string, string | undefined>();
      for (const n of namesIn(p.doc)) names.set(n, await opts.resolveName?.(n).catch(() => undefined));
      const caller = req.caller ?? opts.caller;
      const ev = evaluate(p.doc, {
        entryPoint: req.flow,
        party: req.partyId,
        actions: policyActions(req.actions),
        ...(caller ? { caller } : {}),
        now: (opts.now ?? (() => new Date()))(),
        names,
        // Unknown without the service's record of payments: every receiver counts as new.
        paidBefore: new Set<string>(),
      });
      const rule = ev.rule;
      if (rule.decision === 'deny')
        return {
          outcome: 'deny',
          reason: `rule ${rule.id}: ${rule.reason ?? 'denied'}`,
          policy: ref(rule.id),
        };
      if (rule.decision === 'approve')
        return {
          outcome: 'deny',
          reason: `rule ${rule.id} asks for approvals by people (${(rule.approvals ?? []).map((a) => `${a.count} of ${a.group}`).join(' and ')}), which only the service collects: send it through the service's REST API`,
          policy: ref(rule.id),
        };
      const limit = ev.limits[0];
      if (limit)
        return {
          outcome: 'deny',
          reason: `limit ${limit.limit} applies, and limits over time are kept by the service's database: send it through the service's REST API`,
          policy: ref(limit.limit),
        };
      return { outcome: 'allow', policy: ref(rule.id) };
    },
    settle: async () => {},
  };
}
