/**
 * ANS names where a party is accepted (src/flows/names.ts) against the
 * sandbox's AnsEntry contracts: by name through Scan, the validator's scan
 * proxy only as a cross-check that must agree (an attacker validator's answer
 * is refused, and without Scan a name is refused); party ids untouched;
 * unknown, expired and malformed names refused; the reverse lookup (display
 * only: Scan, then the proxy) and `showParty`'s name and preapproval.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { FlowContext } from '../../src/flows/context.js';
import { isPartyId, nameOfParty, resolveParty } from '../../src/flows/names.js';
import { showParty } from '../../src/flows/onboard.js';
import { ansEntryContract, transferPreapprovalContract } from '../../src/sandbox/amulet.js';
import { type FlowEnv, flowEnv, refusal } from '../support/flow-env.js';

let env: FlowEnv;
let alice: string;
let bob: string;

beforeAll(async () => {
  env = await flowEnv({ seed: 'names' });
  alice = (await env.addParty('alice')).partyId;
  bob = (await env.addParty('bob')).partyId;
  const net = env.net;
  const far = net.clock.now() + 86_400_000_000n;
  net.commitInternal({
    archives: [],
    creates: [
      ansEntryContract(net.dso, alice, 'alice.unverified.cns', far),
      ansEntryContract(net.dso, bob, 'bob-old.unverified.cns', net.clock.now() - 1n),
      transferPreapprovalContract(net.dso, alice, net.validatorParty, net.clock.now()),
    ],
    commandId: 'names-test',
  });
});
afterAll(async () => env?.close());

describe('resolveParty', () => {
  it('returns a party id as is, without asking anyone', async () => {
    const byName = vi.spyOn(env.validator, 'scanProxyAnsEntryByName');
    expect(await resolveParty(env.ctx, alice)).toEqual({ partyId: alice });
    expect(await resolveParty(env.ctx, ` ${bob} `)).toEqual({ partyId: bob });
    expect(byName).not.toHaveBeenCalled();
    byName.mockRestore();
    expect(isPartyId(alice)).toBe(true);
    expect(isPartyId('alice.unverified.cns')).toBe(false);
  });

  it('resolves a name through Scan, the validator proxy agreeing, and keeps the name', async () => {
    const byName = vi.spyOn(env.validator, 'scanProxyAnsEntryByName');
    const fromScan = vi.spyOn(env.scan, 'lookupAnsEntryByName');
    expect(await resolveParty(env.ctx, 'alice.unverified.cns')).toEqual({
      partyId: alice,
      name: 'alice.unverified.cns',
    });
    expect(fromScan).toHaveBeenCalledTimes(1);
    expect(byName).toHaveBeenCalledTimes(1);
    expect((await resolveParty(env.ctx, 'dso.cns')).partyId).toBe(env.net.dso);
    byName.mockRestore();
    fromScan.mockRestore();
  });

  it('refuses unknown and expired names', async () => {
    for (const name of ['nobody.unverified.cns', 'bob-old.unverified.cns']) {
      const e = await refusal(resolveParty(env.ctx, name));
      expect(e.reason).toBe('bad_request');
      expect(e.message).toBe(`no ANS entry named ${name}`);
    }
  });

  it('refuses a malformed party id and an empty input', async () => {
    expect((await refusal(resolveParty(env.ctx, 'alice::notafingerprint'))).message).toMatch(
      /neither a well-formed party id/,
    );
    expect((await refusal(resolveParty(env.ctx, '  '))).reason).toBe('bad_request');
  });

  it('resolves through Scan alone without a validator, or when the scan proxy fails', async () => {
    const { validator: _v, ...noValidator } = env.ctx;
    expect(await resolveParty(noValidator as FlowContext, 'alice.unverified.cns')).toEqual({
      partyId: alice,
      name: 'alice.unverified.cns',
    });
    const fromScan = vi.spyOn(env.scan, 'lookupAnsEntryByName');
    env.sb.ctx.faults.inject({ fault: { kind: 'status', status: 503 }, operation: 'scan-proxy.*' });
    try {
      expect((await resolveParty(env.ctx, 'alice.unverified.cns')).partyId).toBe(alice);
      expect(fromScan).toHaveBeenCalledTimes(1);
    } finally {
      env.sb.ctx.faults.clear();
      fromScan.mockRestore();
    }
  });

  it('refuses a name without Scan: the validator proxy alone is not trusted with it', async () => {
    const { scan: _s, ...onlyValidator } = env.ctx;
    const byName = vi.spyOn(env.validator, 'scanProxyAnsEntryByName');
    const e = await refusal(resolveParty(onlyValidator as FlowContext, 'alice.unverified.cns'));
    expect(e.reason).toBe('bad_request');
    expect(e.message).toBe(
      'alice.unverified.cns: ANS names are resolved through Scan, not through the validator alone (it could answer with any party); configure network.scanUrl (--scan) or pass a party id',
    );
    expect(byName).not.toHaveBeenCalled();
    byName.mockRestore();
    const { validator: _v, scan: _t, ...none } = env.ctx;
    expect((await refusal(resolveParty(none as FlowContext, 'alice.unverified.cns'))).message).toMatch(
      /ANS names are resolved through Scan/,
    );
  });

  it('refuses a name the validator proxy resolves to another party than Scan (attacker validator)', async () => {
    const mallory = env.net.mallory;
    const lie = vi.spyOn(env.validator, 'scanProxyAnsEntryByName').mockImplementation(async (name) => ({
      entry: { user: mallory, name, url: '', description: '' },
    }));
    try {
      const e = await refusal(resolveParty(env.ctx, 'alice.unverified.cns'));
      expect(e.reason).toBe('bad_request');
      expect(e.message).toBe(
        `alice.unverified.cns: Scan resolves it to ${alice} but the validator's scan proxy to ${mallory}; not used (pass a party id)`,
      );
      // A proxy that claims an entry Scan does not have does not make one.
      expect((await refusal(resolveParty(env.ctx, 'nobody.unverified.cns'))).message).toBe(
        'no ANS entry named nobody.unverified.cns',
      );
    } finally {
      lie.mockRestore();
    }
    // …nor does a proxy that denies an entry Scan has: the answers must agree.
    const real = env.validator.scanProxyAnsEntryByName.bind(env.validator);
    const deny = vi
      .spyOn(env.validator, 'scanProxyAnsEntryByName')
      .mockImplementation(() => real('nobody.unverified.cns')); // the proxy's real 404
    try {
      expect((await refusal(resolveParty(env.ctx, 'alice.unverified.cns'))).message).toMatch(
        /the validator's scan proxy to no party/,
      );
    } finally {
      deny.mockRestore();
    }
  });
});

describe('reverse lookup and showParty', () => {
  it('finds the name of a party, none for a party without one', async () => {
    expect(await nameOfParty(env.ctx, alice)).toBe('alice.unverified.cns');
    expect(await nameOfParty(env.ctx, bob)).toBeUndefined();
  });

  it('reverse lookup (display only) asks Scan first, the proxy when Scan fails or is absent', async () => {
    const proxy = vi.spyOn(env.validator, 'scanProxyAnsEntryByParty');
    expect(await nameOfParty(env.ctx, alice)).toBe('alice.unverified.cns');
    expect(proxy).not.toHaveBeenCalled();
    env.sb.ctx.faults.inject({ fault: { kind: 'status', status: 503 }, operation: 'scan.*' });
    try {
      expect(await nameOfParty(env.ctx, alice)).toBe('alice.unverified.cns');
      expect(proxy).toHaveBeenCalledTimes(1);
    } finally {
      env.sb.ctx.faults.clear();
      proxy.mockRestore();
    }
    const { scan: _s, ...onlyValidator } = env.ctx;
    expect(await nameOfParty(onlyValidator as FlowContext, alice)).toBe('alice.unverified.cns');
  });

  it('shows the book record, hosting, ANS name and preapproval', async () => {
    const v = await showParty(env.ctx, alice);
    expect(v.record?.partyId).toBe(alice);
    expect(v.hosted?.synchronizerId).toBe(env.net.synchronizerId);
    expect(v.ansName).toBe('alice.unverified.cns');
    expect(v.preapproval).toMatchObject({ provider: env.net.validatorParty });
    expect(v.preapproval?.contractId).toMatch(/^[0-9a-f]+/);
    expect(v.notes).toEqual([]);
  });

  it('tolerates failing lookups with a note each', async () => {
    env.sb.ctx.faults.inject({ fault: { kind: 'status', status: 503 }, operation: 'scan-proxy.*' });
    env.sb.ctx.faults.inject({ fault: { kind: 'status', status: 503 }, operation: 'scan.*' });
    try {
      const v = await showParty(env.ctx, bob);
      expect(v.record?.partyId).toBe(bob);
      expect(v.ansName).toBeUndefined();
      expect(v.preapproval).toBeUndefined();
      expect(v.notes).toHaveLength(2);
      expect(v.notes[0]).toMatch(/ANS name could not be looked up.*503/);
      expect(v.notes[1]).toMatch(/transfer preapproval could not be looked up.*503/);
    } finally {
      env.sb.ctx.faults.clear();
    }
  });

  it('shows a party that is not in the book with a note', async () => {
    const v = await showParty(env.ctx, env.net.validatorParty);
    expect(v.record).toBeUndefined();
    expect(v.notes[0]).toMatch(/is not in this signer's party book/);
  });
});
