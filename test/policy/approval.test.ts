/**
 * src/policy/approval.ts: fixed vectors (computed independently, with
 * Python's hashlib, json and cryptography, from a key of a fixed seed), the
 * statement hash covering every field, signatures bound to one request and
 * one decision, strict Ed25519 verification that answers false (never
 * throws) on malformed input, and the approver matching checked against a
 * brute-force search.
 */
import { ed25519 } from '@noble/curves/ed25519.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type ApprovalStatement,
  type Approver,
  approvalMessage,
  credentialSealMessage,
  policySealMessage,
  registrationMessage,
  satisfies,
  statementHash,
  verifyApproval,
} from '../../src/policy/approval.js';
import type { Requirement } from '../../src/policy/evaluate.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

const SEED = new Uint8Array(32).map((_, i) => i + 1);
const PUBLIC_KEY = '79b5562e8fe654f94078b112e8a98ba7901f853ae695bed7e0e3910bad049664';
const KEY = { kind: 'ed25519' as const, publicKey: PUBLIC_KEY };

const STATEMENT: ApprovalStatement = {
  v: 1,
  request: '5b0e7d3c-2f4a-4b8e-9c1d-0a1b2c3d4e5f',
  subject: 'withdrawal:7f3a',
  party: 'alice::1220aa',
  entryPoint: 'withdrawal',
  requester: 'ops-bot',
  actions: [
    {
      kind: 'transfer',
      sender: 'alice::1220aa',
      receiver: 'bob::1220bb',
      amount: '1500.0000000000',
      instrument: { admin: 'dso::1220cc', id: 'Amulet' },
      memo: 'invoice 42',
    },
  ],
  policy: { version: 3, sha256: 'ab'.repeat(32), rule: 'large-needs-two' },
  requirement: [{ group: 'treasury', count: 2 }],
  expiresAt: '2026-01-02T03:04:05.000Z',
};

const VECTORS = {
  hash: 'c1a459715022cf20e4d84fbe3eacba94a1b03043c83463449bf7e0c84050067a',
  approveMessage: 'aaec231ad2f46197b601b831ce6dd2d0c6285919f0ca38565e55780f555e3062',
  rejectMessage: 'e5e57719d8951c125b943294a8f83f35a5a4a70b66d17619122b0f8e3a46f553',
  approveSignature:
    'i95DmpynwLBpvwKC9SP0QoLku08d/HZENQ9T1K+sw/L1FsXx7HOybXOUh0qwSwRwF47H0HJrhJqNeb9JILp5Ag==',
  rejectSignature: 'gu7MTD+wwYUSnGFgU4DWIi27nA2pbEKxo8/zVmC0ZplHro9hwQKCWXXdSqgMkJT46HB59PZgvT4EnA9Htt+cBg==',
  registration: '68b342cd80829cf6b008e75827afc1148c57807b9b51d9ead741235e48d3ccc5',
  credentialSeal: '8fef3e9f19c625edff4c7994c99ff41b168edfd5739938c4cacfd5e1b8a14aca',
  policySeal: '6f351a5382b41b678da5c8c31bcc08de247f458783a6c2958e969b79ed1c19fd',
};

const clone = (s: ApprovalStatement): ApprovalStatement => structuredClone(s);

describe('vectors', () => {
  it('the fixed seed gives the fixed public key', () => {
    expect(hex(ed25519.getPublicKey(SEED))).toBe(PUBLIC_KEY);
  });

  it('statement hash and the messages are the fixed ones', () => {
    expect(statementHash(STATEMENT)).toBe(VECTORS.hash);
    expect(hex(approvalMessage(VECTORS.hash, 'approve'))).toBe(VECTORS.approveMessage);
    expect(hex(approvalMessage(VECTORS.hash, 'reject'))).toBe(VECTORS.rejectMessage);
    expect(approvalMessage(VECTORS.hash, 'approve')).toHaveLength(32);
    expect(hex(registrationMessage(KEY))).toBe(VECTORS.registration);
    expect(
      hex(
        credentialSealMessage({
          id: 'c1',
          approver: 'alice',
          kind: 'ed25519',
          publicKey: PUBLIC_KEY,
          activatedBy: 'admin',
        }),
      ),
    ).toBe(VECTORS.credentialSeal);
    expect(hex(policySealMessage({ version: 3, sha256: 'ab'.repeat(32) }))).toBe(VECTORS.policySeal);
  });

  it('the key order of the statement does not matter (canonical JSON)', () => {
    const reversed = Object.fromEntries(Object.entries(STATEMENT).reverse()) as unknown as ApprovalStatement;
    expect(statementHash(reversed)).toBe(VECTORS.hash);
  });

  it('the fixed signatures are what Ed25519 gives and they verify', () => {
    const m = approvalMessage(VECTORS.hash, 'approve');
    expect(b64(ed25519.sign(m, SEED))).toBe(VECTORS.approveSignature);
    expect(verifyApproval(KEY, m, VECTORS.approveSignature)).toBe(true);
    expect(verifyApproval(KEY, approvalMessage(VECTORS.hash, 'reject'), VECTORS.rejectSignature)).toBe(true);
  });

  it('a seal or registration message covers only the fields it names', () => {
    const extra = { ...KEY, label: 'laptop' } as typeof KEY;
    expect(hex(registrationMessage(extra))).toBe(VECTORS.registration);
    expect(hex(registrationMessage({ ...KEY, publicKey: `${PUBLIC_KEY.slice(0, 63)}5` }))).not.toBe(
      VECTORS.registration,
    );
    expect(hex(policySealMessage({ version: 4, sha256: 'ab'.repeat(32) }))).not.toBe(VECTORS.policySeal);
  });
});

describe('statement hash binds every field', () => {
  const tampers: [string, (s: ApprovalStatement) => void][] = [
    ['v', (s) => Object.assign(s, { v: 2 })],
    ['request', (s) => Object.assign(s, { request: '5b0e7d3c-2f4a-4b8e-9c1d-0a1b2c3d4e50' })],
    ['subject', (s) => Object.assign(s, { subject: 'withdrawal:7f3b' })],
    ['party', (s) => Object.assign(s, { party: 'alice::1220ab' })],
    ['entryPoint', (s) => Object.assign(s, { entryPoint: 'transfer' })],
    ['requester', (s) => Object.assign(s, { requester: 'ops-bot2' })],
    ['action kind', (s) => Object.assign(s.actions[0] ?? {}, { kind: 'exercise' })],
    ['action sender', (s) => Object.assign(s.actions[0] ?? {}, { sender: 'carol::1220aa' })],
    ['action receiver', (s) => Object.assign(s.actions[0] ?? {}, { receiver: 'mallory::1220bb' })],
    ['action amount', (s) => Object.assign(s.actions[0] ?? {}, { amount: '15000.0000000000' })],
    ['amount scale', (s) => Object.assign(s.actions[0] ?? {}, { amount: '1500.0' })],
    [
      'instrument admin',
      (s) => Object.assign(s.actions[0] ?? {}, { instrument: { admin: 'x::1', id: 'Amulet' } }),
    ],
    [
      'instrument id',
      (s) => Object.assign(s.actions[0] ?? {}, { instrument: { admin: 'dso::1220cc', id: 'USDC' } }),
    ],
    ['memo', (s) => Object.assign(s.actions[0] ?? {}, { memo: 'invoice 43' })],
    ['memo removed', (s) => delete s.actions[0]?.memo],
    ['action added', (s) => s.actions.push({ kind: 'transfer', amount: '1' })],
    ['actions removed', (s) => s.actions.splice(0)],
    ['policy version', (s) => Object.assign(s.policy, { version: 4 })],
    ['policy sha256', (s) => Object.assign(s.policy, { sha256: 'ac'.repeat(32) })],
    ['policy rule', (s) => Object.assign(s.policy, { rule: 'other' })],
    ['requirement group', (s) => Object.assign(s.requirement[0] ?? {}, { group: 'compliance' })],
    ['requirement count', (s) => Object.assign(s.requirement[0] ?? {}, { count: 1 })],
    ['requirement added', (s) => s.requirement.push({ group: 'compliance', count: 1 })],
    ['expiresAt', (s) => Object.assign(s, { expiresAt: '2026-01-03T03:04:05.000Z' })],
  ];
  for (const [name, tamper] of tampers)
    it(`changing ${name} changes the hash`, () => {
      const s = clone(STATEMENT);
      tamper(s);
      expect(statementHash(s)).not.toBe(VECTORS.hash);
    });
});

describe('signatures are bound to one request and one decision', () => {
  it('a signature for request A does not verify for request B with the same amount', () => {
    const b = clone(STATEMENT);
    b.request = '0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70';
    const hashB = statementHash(b);
    expect(hashB).not.toBe(VECTORS.hash);
    expect(verifyApproval(KEY, approvalMessage(hashB, 'approve'), VECTORS.approveSignature)).toBe(false);
  });

  it('approve and reject messages differ, and one decision’s signature is not the other’s', () => {
    expect(VECTORS.approveMessage).not.toBe(VECTORS.rejectMessage);
    expect(verifyApproval(KEY, approvalMessage(VECTORS.hash, 'reject'), VECTORS.approveSignature)).toBe(
      false,
    );
    expect(verifyApproval(KEY, approvalMessage(VECTORS.hash, 'approve'), VECTORS.rejectSignature)).toBe(
      false,
    );
  });

  it('messages of different purposes never coincide', () => {
    const all = [
      hex(approvalMessage(VECTORS.hash, 'approve')),
      hex(registrationMessage(KEY)),
      hex(
        credentialSealMessage({
          id: 'c1',
          approver: 'a',
          kind: 'ed25519',
          publicKey: PUBLIC_KEY,
          activatedBy: 'b',
        }),
      ),
      hex(policySealMessage({ version: 1, sha256: VECTORS.hash })),
    ];
    expect(new Set(all).size).toBe(all.length);
  });
});

describe('verifyApproval is strict and never throws', () => {
  const m = approvalMessage(VECTORS.hash, 'approve');
  const sig = Buffer.from(VECTORS.approveSignature, 'base64');
  // the group order L; S + L is the same scalar, not canonical
  const L = (1n << 252n) + 27742317777372353535851937790883648493n;

  const cases: [string, unknown, unknown, unknown][] = [
    [
      'another key',
      { kind: 'ed25519', publicKey: hex(ed25519.getPublicKey(new Uint8Array(32))) },
      m,
      VECTORS.approveSignature,
    ],
    ['a key of 31 bytes', { kind: 'ed25519', publicKey: PUBLIC_KEY.slice(2) }, m, VECTORS.approveSignature],
    ['a key of 33 bytes', { kind: 'ed25519', publicKey: `${PUBLIC_KEY}00` }, m, VECTORS.approveSignature],
    [
      'a key that is not hex',
      { kind: 'ed25519', publicKey: `${PUBLIC_KEY.slice(0, 62)}zz` },
      m,
      VECTORS.approveSignature,
    ],
    [
      'a key given as base64',
      { kind: 'ed25519', publicKey: Buffer.from(PUBLIC_KEY, 'hex').toString('base64') },
      m,
      VECTORS.approveSignature,
    ],
    [
      'a small-order key (the identity point)',
      { kind: 'ed25519', publicKey: `01${'00'.repeat(31)}` },
      m,
      VECTORS.approveSignature,
    ],
    [
      'a key that is not a point',
      { kind: 'ed25519', publicKey: `02${'00'.repeat(31)}` },
      m,
      VECTORS.approveSignature,
    ],
    ['the webauthn kind (not yet)', { kind: 'webauthn', publicKey: PUBLIC_KEY }, m, VECTORS.approveSignature],
    ['an unknown kind', { kind: 'rsa', publicKey: PUBLIC_KEY }, m, VECTORS.approveSignature],
    ['no key', null, m, VECTORS.approveSignature],
    ['a key without its public key', { kind: 'ed25519' }, m, VECTORS.approveSignature],
    [
      'a message of other bytes',
      KEY,
      approvalMessage(VECTORS.hash.replace(/^c/, 'd'), 'approve'),
      VECTORS.approveSignature,
    ],
    ['a message that is a string', KEY, VECTORS.approveMessage, VECTORS.approveSignature],
    ['an empty signature', KEY, m, ''],
    ['a signature of 63 bytes', KEY, m, b64(sig.subarray(0, 63))],
    ['a signature of 65 bytes', KEY, m, b64(Buffer.concat([sig, Buffer.of(0)]))],
    ['a signature without padding', KEY, m, VECTORS.approveSignature.replace(/=+$/, '')],
    ['a signature in base64url', KEY, m, sig.toString('base64url')],
    ['a signature in hex', KEY, m, sig.toString('hex')],
    ['a signature with spaces', KEY, m, ` ${VECTORS.approveSignature}`],
    [
      'a signature with a line break',
      KEY,
      m,
      `${VECTORS.approveSignature.slice(0, 40)}\n${VECTORS.approveSignature.slice(40)}`,
    ],
    ['a non-canonical base64 (trailing bits set)', KEY, m, VECTORS.approveSignature.replace(/g==$/, 'h==')],
    ['a flipped bit', KEY, m, b64(Buffer.from(sig.map((b, i) => (i === 10 ? b ^ 1 : b))))],
    ['a signature that is a number', KEY, m, 42],
    ['a signature that is an object', KEY, m, { toString: () => VECTORS.approveSignature }],
  ];
  for (const [name, key, message, signature] of cases)
    it(`false for ${name}`, () => {
      expect(() =>
        verifyApproval(key as typeof KEY, message as Uint8Array, signature as string),
      ).not.toThrow();
      expect(verifyApproval(key as typeof KEY, message as Uint8Array, signature as string)).toBe(false);
    });

  it('false for a non-canonical S (S + L)', () => {
    let s = 0n;
    for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(sig[i] as number);
    const big = s + L;
    const bytes = Buffer.from(sig);
    for (let i = 0; i < 32; i++) bytes[32 + i] = Number((big >> BigInt(8 * i)) & 0xffn);
    expect(big < 1n << 256n).toBe(true);
    expect(verifyApproval(KEY, m, b64(bytes))).toBe(false);
  });

  it('an upper-case hex key is the same key', () => {
    expect(
      verifyApproval({ kind: 'ed25519', publicKey: PUBLIC_KEY.toUpperCase() }, m, VECTORS.approveSignature),
    ).toBe(true);
  });

  it('never throws on arbitrary input', () => {
    fc.assert(
      fc.property(fc.anything(), fc.anything(), fc.anything(), (key, message, signature) => {
        expect(verifyApproval(key as typeof KEY, message as Uint8Array, signature as string)).toBe(false);
      }),
      { numRuns: 300 },
    );
  });
});

describe('satisfies', () => {
  const a = (approver: string, ...groups: string[]): Approver => ({ approver, groups });

  it('an approver counts once overall: dave (compliance, treasury) and alice (treasury) miss one of treasury', () => {
    const req: Requirement = [
      { group: 'compliance', count: 1 },
      { group: 'treasury', count: 2 },
    ];
    expect(satisfies(req, [a('dave', 'compliance', 'treasury'), a('alice', 'treasury')])).toEqual({
      met: false,
      missing: [{ group: 'treasury', need: 1 }],
    });
    expect(
      satisfies(req, [a('dave', 'compliance', 'treasury'), a('alice', 'treasury'), a('bob', 'treasury')]),
    ).toEqual({ met: true, missing: [] });
  });

  it('an approver is placed where it is needed (augmenting path)', () => {
    // dave first takes compliance? No: alice can only be compliance, so dave must be treasury.
    const req: Requirement = [
      { group: 'treasury', count: 1 },
      { group: 'compliance', count: 1 },
    ];
    expect(satisfies(req, [a('dave', 'treasury', 'compliance'), a('alice', 'compliance')]).met).toBe(true);
    expect(satisfies(req, [a('alice', 'compliance'), a('dave', 'compliance', 'treasury')]).met).toBe(true);
  });

  it('the same approver listed twice is one approver', () => {
    expect(
      satisfies([{ group: 'treasury', count: 2 }], [a('alice', 'treasury'), a('alice', 'treasury')]),
    ).toEqual({
      met: false,
      missing: [{ group: 'treasury', need: 1 }],
    });
  });

  it('an empty requirement is met; nobody meets a non-empty one', () => {
    expect(satisfies([], [])).toEqual({ met: true, missing: [] });
    expect(satisfies([{ group: 'g', count: 0 }], [])).toEqual({ met: true, missing: [] });
    expect(satisfies([{ group: 'g', count: 3 }], [a('x', 'other')])).toEqual({
      met: false,
      missing: [{ group: 'g', need: 3 }],
    });
  });

  it('a group named twice in the requirement adds up', () => {
    const req: Requirement = [
      { group: 'g', count: 1 },
      { group: 'g', count: 1 },
    ];
    expect(satisfies(req, [a('x', 'g')])).toEqual({ met: false, missing: [{ group: 'g', need: 1 }] });
    expect(satisfies(req, [a('x', 'g'), a('y', 'g')]).met).toBe(true);
  });

  it('a huge count does not exhaust memory', () => {
    expect(satisfies([{ group: 'g', count: 1e9 }], [a('x', 'g')])).toEqual({
      met: false,
      missing: [{ group: 'g', need: 1e9 - 1 }],
    });
  });

  // Brute force: every way of giving each approver one of its groups (or none).
  function bruteForce(req: Requirement, approvers: readonly Approver[]): { met: boolean; covered: number } {
    const people = new Map<string, Set<string>>();
    for (const p of approvers) {
      const s = people.get(p.approver) ?? new Set<string>();
      for (const g of p.groups) s.add(g);
      people.set(p.approver, s);
    }
    const choices = [...people.values()].map((s) => [undefined, ...s]);
    const need = new Map<string, number>();
    for (const r of req) need.set(r.group, (need.get(r.group) ?? 0) + r.count);
    const total = [...need.values()].reduce((x, y) => x + y, 0);
    let best = 0;
    const walk = (i: number, got: Map<string, number>): void => {
      if (i === choices.length) {
        let covered = 0;
        for (const [g, n] of need) covered += Math.min(n, got.get(g) ?? 0);
        best = Math.max(best, covered);
        return;
      }
      for (const g of choices[i] ?? []) {
        if (g !== undefined) got.set(g, (got.get(g) ?? 0) + 1);
        walk(i + 1, got);
        if (g !== undefined) got.set(g, (got.get(g) ?? 0) - 1);
      }
    };
    walk(0, new Map());
    return { met: best === total, covered: best };
  }

  it('met iff a brute-force assignment exists; the missing count is what no assignment covers', () => {
    const group = fc.constantFrom('a', 'b', 'c', 'd');
    fc.assert(
      fc.property(
        fc.array(fc.record({ group, count: fc.integer({ min: 0, max: 3 }) }), { maxLength: 4 }),
        fc.array(
          fc.record({
            approver: fc.constantFrom('p1', 'p2', 'p3', 'p4', 'p5', 'p6'),
            groups: fc.uniqueArray(group, { maxLength: 3 }),
          }),
          { maxLength: 7 },
        ),
        (req, approvers) => {
          const got = satisfies(req, approvers);
          const want = bruteForce(req, approvers);
          expect(got.met).toBe(want.met);
          const total = req.reduce((x, r) => x + r.count, 0);
          expect(got.missing.reduce((x, m) => x + m.need, 0)).toBe(total - want.covered);
          for (const m of got.missing) expect(m.need).toBeGreaterThan(0);
        },
      ),
      { numRuns: 500 },
    );
  });
});
