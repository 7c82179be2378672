import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { JsCantonErrorSchema } from '../../src/canton/errors.js';
import {
  loadSpec,
  type OpenApiSpec,
  SPECS_DIR as SPECS,
  specProblems,
  validateAgainst,
} from '../support/openapi.js';

const ledger = loadSpec(join(SPECS, 'canton-ledger-api/openapi-3.5.1.yaml'));
const validator = loadSpec(join(SPECS, 'splice-0.6.1/validator-internal.yaml'));
const scan = loadSpec(join(SPECS, 'splice-0.6.1/scan.yaml'));

const HASH = `1220${'ab'.repeat(32)}`;

const validError = {
  code: 'FAILED_TO_EXECUTE_TRANSACTION',
  cause: 'Failed to execute transaction: invalid signature',
  correlationId: 'abc',
  traceId: 'def',
  context: { participant: 'participant1' },
  resources: [['PARTY', 'alice::1220cd']],
  errorCategory: 8,
  grpcCodeValue: 3,
  retryInfo: '1 second',
  definiteAnswer: false,
};

describe('openapi validator: JsCantonError (Ledger API 3.5.1)', () => {
  it('accepts full and minimal errors', () => {
    expect(validateAgainst(ledger, 'JsCantonError', validError)).toEqual([]);
    expect(
      validateAgainst(ledger, 'JsCantonError', { code: 'X', cause: 'y', context: {}, errorCategory: 1 }),
    ).toEqual([]);
  });

  it('reports missing fields, wrong types, bad tuples and null without nullable', () => {
    expect(validateAgainst(ledger, 'JsCantonError', { code: 'X', cause: 'y', errorCategory: 1 })).toEqual([
      '$: missing required "context"',
    ]);
    expect(validateAgainst(ledger, 'JsCantonError', { ...validError, errorCategory: '8' })).toEqual([
      '$.errorCategory: expected integer, got string',
    ]);
    expect(validateAgainst(ledger, 'JsCantonError', { ...validError, errorCategory: 8.5 })).toEqual([
      '$.errorCategory: expected integer, got number',
    ]);
    expect(validateAgainst(ledger, 'JsCantonError', { ...validError, grpcCodeValue: 2 ** 31 })).toEqual([
      '$.grpcCodeValue: 2147483648 is out of int32 range',
    ]);
    expect(validateAgainst(ledger, 'JsCantonError', { ...validError, context: { a: 1 } })).toEqual([
      '$.context.a: expected string, got integer',
    ]);
    expect(
      validateAgainst(ledger, 'JsCantonError', { ...validError, resources: [['a', 'b', 'c'], ['a']] }),
    ).toEqual(['$.resources[0]: more than 2 items', '$.resources[1]: fewer than 2 items']);
    expect(validateAgainst(ledger, 'JsCantonError', { ...validError, retryInfo: null })).toEqual([
      '$.retryInfo: null is not allowed',
    ]);
    expect(validateAgainst(ledger, 'JsCantonError', [])).toEqual(['$: expected object, got array']);
  });

  it('agrees with the runtime zod schema on non-null samples', () => {
    const samples: unknown[] = [
      validError,
      { code: 'X', cause: 'y', context: {}, errorCategory: 1 },
      { code: 'X', cause: 'y', errorCategory: 1 },
      { code: 'X', context: {}, errorCategory: 1 },
      { ...validError, errorCategory: '8' },
      { ...validError, definiteAnswer: 'no' },
      { ...validError, resources: [['a']] },
      { error: 'splice style' },
    ];
    for (const s of samples) {
      const specOk = validateAgainst(ledger, 'JsCantonError', s).length === 0;
      expect(JsCantonErrorSchema.safeParse(s).success, JSON.stringify(s)).toBe(specOk);
    }
  });
});

describe('openapi validator: Ledger API oneOf (protobuf oneof encoding)', () => {
  it('accepts exactly one branch', () => {
    const create = { CreateCommand: { templateId: '#pkg:Mod:T', createArguments: { owner: 'alice' } } };
    expect(validateAgainst(ledger, 'Command', create)).toEqual([]);
    const problems = validateAgainst(ledger, 'Command', { CreateCommand: { templateId: '#pkg:Mod:T' } });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^\$: matches none of oneOf/);
    expect(problems[0]).toContain('missing required "createArguments"');
  });
});

describe('openapi validator: Splice validator-internal', () => {
  const generated = {
    party_id: 'alice::1220cd',
    topology_txs: [{ topology_tx: 'CgQIARAB', hash: HASH }],
  };

  it('GenerateExternalPartyTopologyResponse', () => {
    expect(validateAgainst(validator, 'GenerateExternalPartyTopologyResponse', generated)).toEqual([]);
    expect(
      validateAgainst(validator, 'GenerateExternalPartyTopologyResponse', {
        party_id: 7,
        topology_txs: [{ topology_tx: 'CgQIARAB' }, 'x'],
      }),
    ).toEqual([
      '$.party_id: expected string, got integer',
      '$.topology_txs[0]: missing required "hash"',
      '$.topology_txs[1]: expected object, got string',
    ]);
  });

  it('ExternalPartyBalanceResponse (int64 as a JSON integer)', () => {
    const balance = {
      party_id: 'alice::1220cd',
      total_unlocked_coin: '10.0000000000',
      total_locked_coin: '0.0000000000',
      total_coin_holdings: '10.0000000000',
      accumulated_holding_fees_unlocked: '0.0000000000',
      accumulated_holding_fees_locked: '0.0000000000',
      accumulated_holding_fees_total: '0.0000000000',
      total_available_coin: '10.0000000000',
      computed_as_of_round: 1234,
    };
    expect(validateAgainst(validator, 'ExternalPartyBalanceResponse', balance)).toEqual([]);
    expect(
      validateAgainst(validator, 'ExternalPartyBalanceResponse', {
        ...balance,
        computed_as_of_round: '1234',
      }),
    ).toEqual(['$.computed_as_of_round: expected integer, got string']);
  });

  it('nullable object and $ref', () => {
    expect(validateAgainst(validator, 'RegistrationRequest', null)).toEqual([]);
    expect(validateAgainst(validator, 'RegistrationRequest', {})).toEqual([]);
    expect(validateAgainst(validator, 'RegistrationRequest', 'x')).toEqual([
      '$: expected object, got string',
    ]);
    expect(validateAgainst(validator, 'ErrorResponse', { error: 'boom' })).toEqual([]);
    expect(validateAgainst(validator, 'ErrorResponse', {})).toEqual(['$: missing required "error"']);
  });

  it('throws on an unknown component', () => {
    expect(() => validateAgainst(validator, 'NoSuchThing', {})).toThrow(/NoSuchThing/);
  });
});

describe('openapi validator: Scan discriminator, allOf, enum, nullable $ref', () => {
  it('discriminator picks the branch; allOf and enum are enforced', () => {
    expect(validateAgainst(scan, 'TransferCommandContractStatus', { status: 'sent' })).toEqual([]);
    expect(
      validateAgainst(scan, 'TransferCommandContractStatus', {
        status: 'failed',
        failure_kind: 'expired',
        reason: 'expired before completion',
      }),
    ).toEqual([]);
    expect(validateAgainst(scan, 'TransferCommandContractStatus', { status: 'failed' })).toEqual([
      '$: missing required "failure_kind"',
      '$: missing required "reason"',
    ]);
    expect(
      validateAgainst(scan, 'TransferCommandContractStatus', {
        status: 'failed',
        failure_kind: 'lost',
        reason: 'r',
      }),
    ).toEqual(['$.failure_kind: "lost" is not one of ["failed","expired","withdrawn"]']);
    expect(validateAgainst(scan, 'TransferCommandContractStatus', { status: 'pending' })).toEqual([
      '$: unknown discriminator value "pending" for "status"',
    ]);
  });

  it('honours nullable next to $ref', () => {
    const schema = scan.components.schemas.EventHistoryItem;
    expect(schema).toBeDefined();
    const props = (schema as { properties: Record<string, { nullable?: boolean; $ref?: string }> })
      .properties;
    expect(props.verdict).toMatchObject({ nullable: true });
    const problems = validateAgainst(scan, 'EventHistoryItem', { update: null, verdict: null });
    expect(problems.filter((p) => p.startsWith('$.update') || p.startsWith('$.verdict'))).toEqual([]);
    expect(
      validateAgainst(scan, 'EventHistoryItem', { verdict: 5 }).some((p) => p.startsWith('$.verdict')),
    ).toBe(true);
  });
});

describe('openapi validator: coverage of the published documents', () => {
  const files = [
    'canton-ledger-api/openapi-3.5.1.yaml',
    'canton-ledger-api/openapi-3.4.12.yaml',
    ...readdirSync(join(SPECS, 'splice-0.6.1'))
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => `splice-0.6.1/${f}`),
  ];

  it.each(files)('%s uses only supported keywords and local $refs that resolve', (file) => {
    const spec: OpenApiSpec = loadSpec(join(SPECS, file));
    expect(Object.keys(spec.components.schemas).length).toBeGreaterThan(0);
    expect(specProblems(spec)).toEqual([]);
  });
});
