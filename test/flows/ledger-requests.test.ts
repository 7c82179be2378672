/**
 * The request builders of src/flows/ledger-requests.ts: the client sends their bodies without
 * validating them at run time, so here each builder's output goes through its endpoint's schema
 * (unit, and the bodies a real signing flow sends against the sandbox participant). Also: the
 * execute body carries the participant's own base64 text of the prepared transaction, which the
 * strict decoder only accepts when it is exactly the base64 of the bytes that were hashed.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import {
  CompletionStreamRequestSchema,
  GetActiveContractsRequestSchema,
  GetUpdateByOffsetRequestSchema,
  GetUpdatesRequestSchema,
  type JsExecuteSubmissionAndWaitRequest,
  JsExecuteSubmissionAndWaitRequestSchema,
} from '../../src/canton/ledger-api/schemas.js';
import { ledgerFlow } from '../../src/flows/ledger.js';
import {
  completionsRequest,
  executeRequest,
  FROM_BUILDER,
  interfaceViewsRequest,
  partyUpdateAtRequest,
  partyUpdatesRequest,
} from '../../src/flows/ledger-requests.js';
import { runFlow, verifyPrepared } from '../../src/flows/pipeline.js';
import { base64ToBytes, bytesToBase64 } from '../../src/hashing/input.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type FlowEnv, flowEnv, preapprovalProposal } from '../support/flow-env.js';

const PARTY = `alice::1220${'ab'.repeat(32)}`;
const SIG = {
  format: 'SIGNATURE_FORMAT_CONCAT',
  signature: bytesToBase64(new Uint8Array(64).fill(7)),
  signedBy: `1220${'cd'.repeat(32)}`,
  signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_ED25519',
} as const;

/** The schema accepts the body and would send it unchanged (request schemas transform nothing). */
function valid(schema: { parse(v: unknown): unknown }, body: unknown): void {
  expect(JSON.parse(JSON.stringify(schema.parse(body)))).toEqual(JSON.parse(JSON.stringify(body)));
}

describe('request builders produce schema-valid bodies', () => {
  it('execute', () => {
    for (const scheme of ['v2', 'v3'] as const)
      valid(
        JsExecuteSubmissionAndWaitRequestSchema,
        executeRequest(
          'user-1',
          {
            preparedTransactionBase64: bytesToBase64(randomBytes(31_000)),
            party: { partyId: PARTY } as PartyRecord,
            signature: SIG,
            scheme,
          },
          randomUUID(),
        ),
      );
  });

  it('completions, active contracts, update at an offset, updates', () => {
    valid(CompletionStreamRequestSchema, completionsRequest('user-1', PARTY, 0));
    valid(CompletionStreamRequestSchema, completionsRequest('user-1', PARTY, 12_345));
    valid(GetActiveContractsRequestSchema, interfaceViewsRequest(PARTY, '#pkg:Mod:Holding', 42));
    valid(GetUpdateByOffsetRequestSchema, partyUpdateAtRequest(PARTY, 7));
    valid(GetUpdatesRequestSchema, partyUpdatesRequest(PARTY, 0, 9));
  });

  it('the check can fail: an out-of-range value is refused by the same schemas', () => {
    expect(() => CompletionStreamRequestSchema.parse(completionsRequest('user-1', '', 0))).toThrow();
    expect(() => GetUpdateByOffsetRequestSchema.parse(partyUpdateAtRequest(PARTY, 0))).toThrow();
  });
});

describe('the client and fromBuilder', () => {
  it('sends a built body as is; without the option it validates it (nothing sent)', async () => {
    const sent: string[] = [];
    const fetch = (async (_url: string | URL | Request, init?: RequestInit) => {
      sent.push(String(init?.body));
      return new Response('[]', { status: 200, headers: { 'content-type': 'application/json' } });
    }) as typeof globalThis.fetch;
    const client = new LedgerApiClient({ baseUrl: 'http://127.0.0.1:1', fetch });
    // An empty party list: the schema refuses it, a builder never makes it.
    const odd = { userId: 'user-1', parties: [], beginExclusive: 0 };
    await expect(client.completions(odd)).rejects.toThrow(/invalid request at parties/);
    expect(sent).toHaveLength(0);
    await client.completions(odd, FROM_BUILDER);
    expect(sent.map((b) => JSON.parse(b))).toEqual([odd]);
  });
});

describe('strict base64: accepted text is exactly the base64 of its bytes', () => {
  it('random bytes, and random one-character changes of their text', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ .\nŁ';
    let accepted = 0;
    for (let i = 0; i < 3000; i++) {
      const text = bytesToBase64(randomBytes(i % 40));
      const chars = [...text];
      if (i % 3 !== 0 && chars.length > 0) {
        const at = randomBytes(2).readUInt16BE() % chars.length;
        chars[at] = alphabet[randomBytes(1)[0]! % alphabet.length]!;
      }
      const t = chars.join('');
      let bytes: Uint8Array;
      try {
        bytes = base64ToBytes(t);
      } catch {
        continue;
      }
      accepted++;
      expect(bytesToBase64(bytes)).toBe(t.trim());
    }
    expect(accepted).toBeGreaterThan(1000);
  });
});

describe('a signing flow against the sandbox participant', () => {
  let env: FlowEnv;
  let alice: PartyRecord;
  beforeAll(async () => {
    env = await flowEnv({ seed: 'ledger-requests' });
    alice = await env.addParty('alice');
  });
  afterAll(async () => env?.close());

  it('executes the prepared text it was given, with a schema-valid body built by the builder', async () => {
    const prepare = vi.spyOn(env.ledger, 'prepare');
    const execute = vi.spyOn(env.ledger, 'executeAndWait');
    const flow = ledgerFlow(env.ctx, {
      name: 'test-proposal',
      party: alice,
      intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: env.net.validatorParty },
      commandId: randomUUID(),
      request: async () => ({
        synchronizerId: env.net.synchronizerId,
        commands: [preapprovalProposal(env.net, alice.partyId, env.net.validatorParty)],
      }),
    });
    const r = await runFlow(flow, env.ctx);
    expect(r.outcome).toBe('committed');
    const prepared = (await prepare.mock.results[0]!.value) as {
      preparedTransaction: string;
      preparedTransactionHash: string;
      hashingSchemeVersion: string;
    };
    const [body, opts] = execute.mock.calls[0]! as [JsExecuteSubmissionAndWaitRequest, unknown];
    expect(opts).toEqual(FROM_BUILDER);
    valid(JsExecuteSubmissionAndWaitRequestSchema, body);
    expect(body.preparedTransaction).toBe(prepared.preparedTransaction);
    // What was hashed and signed: the bytes of exactly that text.
    const v = verifyPrepared(
      't',
      {
        preparedTransaction: prepared.preparedTransaction,
        claimedHash: prepared.preparedTransactionHash,
        scheme: prepared.hashingSchemeVersion.endsWith('V3') ? 'v3' : 'v2',
      },
      alice,
      flow.intent,
      { nowUs: () => env.net.clock.now() },
    );
    expect(v.preparedBase64).toBe(prepared.preparedTransaction);
    expect(bytesToBase64(v.tx.bytes)).toBe(prepared.preparedTransaction);
    expect(Buffer.from(r.hash, 'hex')).toEqual(Buffer.from(v.hash));
  });
});
