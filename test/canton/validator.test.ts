import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { staticBearer } from '../../src/canton/auth.js';
import { CantonApiError } from '../../src/canton/errors.js';
import { ValidatorClient } from '../../src/canton/validator/client.js';
import { loadSpec, type OpenApiSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';
import { type Handler, type Hit, type StubServer, send, startStubServer } from '../support/stub-server.js';

// ---------------------------------------------------------------------------------------------
// Published documents

const validatorSpec = loadSpec(join(SPECS_DIR, 'splice-0.6.1/validator-internal.yaml'));
const scanProxySpec = loadSpec(join(SPECS_DIR, 'splice-0.6.1/scan-proxy.yaml'));
const registrySpec = loadSpec(join(SPECS_DIR, 'splice-0.6.1/transfer-instruction-v1.yaml'));

const SPEC_NAME = new Map<OpenApiSpec, string>([
  [validatorSpec, 'validator-internal.yaml'],
  [scanProxySpec, 'scan-proxy.yaml'],
  [registrySpec, 'transfer-instruction-v1.yaml'],
]);

// ---------------------------------------------------------------------------------------------
// A local stub of the validator app: each test registers the exact method + raw path it expects.
// `server.allHits` keeps every request that reached the stub in this file (for the spec-coverage test).

const PREFIX = '/api/validator';
let server: StubServer;

beforeAll(async () => {
  server = await startStubServer({ prefix: PREFIX });
});

afterAll(() => server.close());

beforeEach(() => {
  server.reset();
});

const ADMIN_TOKEN = 'admin-token';
const PROXY_TOKEN = 'proxy-token';

function client(): ValidatorClient {
  return new ValidatorClient({
    baseUrl: server.baseUrl,
    auth: staticBearer(ADMIN_TOKEN),
    scanProxyAuth: staticBearer(PROXY_TOKEN),
    retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 5 },
    timeoutMs: 5000,
  });
}

async function failure(p: Promise<unknown>): Promise<CantonApiError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(CantonApiError);
    return e as CantonApiError;
  }
  throw new Error('expected the call to fail');
}

// ---------------------------------------------------------------------------------------------
// Fixtures (shaped after the spec components; values realistic, not real)

const FP = `1220${'ab'.repeat(32)}`;
const PARTY = `alice::${FP}`;
const RECEIVER = `bob::1220${'cd'.repeat(32)}`;
const DSO = `DSO::1220${'ee'.repeat(32)}`;
const PK = 'c0'.repeat(32);
const SIG = '5e'.repeat(64);
const TX_B64 = Buffer.from('prepared transaction bytes').toString('base64');
const TOPO_B64 = Buffer.from('topology transaction bytes').toString('base64');
const HASH34 = `1220${'77'.repeat(32)}`;
const HASH32 = '99'.repeat(32);
const enc = encodeURIComponent;

function contract(template: string, id: string, payload: Record<string, unknown>) {
  return {
    template_id: `3ca1343ab26b453d38c8adb70dca5f1ead8440c42b59b68f070786955cbf9ec1:${template}`,
    contract_id: id,
    payload,
    created_event_blob: Buffer.from(`blob of ${id}`).toString('base64'),
    created_at: '2026-03-01T12:00:00.000000Z',
  };
}
const withState = (c: ReturnType<typeof contract>) => ({ contract: c, domain_id: `global-domain::${FP}` });

const PROPOSAL = withState(
  contract('Splice.Wallet.TransferPreapproval:ExternalPartySetupProposal', '00aa01', {
    validator: `validator::${FP}`,
    user: PARTY,
    dso: DSO,
    preapprovalExpiresAt: '2026-06-01T00:00:00Z',
  }),
);
const PREAPPROVAL = withState(
  contract('Splice.AmuletRules:TransferPreapproval', '00bb02', {
    dso: DSO,
    receiver: RECEIVER,
    provider: `validator::${FP}`,
    validFrom: '2026-03-01T12:00:00Z',
    lastRenewedAt: '2026-03-01T12:00:00Z',
    expiresAt: '2026-06-01T12:00:00Z',
  }),
);
const COUNTER = withState(
  contract('Splice.ExternalPartyAmuletRules:TransferCommandCounter', '00cc03', {
    dso: DSO,
    sender: PARTY,
    nextNonce: '7',
  }),
);
const ANS_ENTRY = {
  contract_id: '00dd04',
  user: PARTY,
  name: 'alice.unverified.cns',
  url: 'https://alice.example.com',
  description: 'Alice',
  expires_at: '2027-01-01T00:00:00Z',
};
const SUMMARY = {
  party_id: PARTY,
  total_unlocked_coin: '100.0000000000',
  total_locked_coin: '5.0000000000',
  total_coin_holdings: '105.0000000000',
  accumulated_holding_fees_unlocked: '0.0100000000',
  accumulated_holding_fees_locked: '0.0010000000',
  accumulated_holding_fees_total: '0.0110000000',
  total_available_coin: '99.9900000000',
};
const CHOICE_CONTEXT = {
  choiceContextData: { values: { 'amulet-rules': { tag: 'AV_ContractId', value: '00ee05' } } },
  disclosedContracts: [
    {
      templateId: '#splice-amulet:Splice.AmuletRules:AmuletRules',
      contractId: '00ee05',
      createdEventBlob: Buffer.from('amulet rules blob').toString('base64'),
      synchronizerId: `global-domain::${FP}`,
      debugPackageName: 'splice-amulet',
      debugPayload: { dso: DSO },
      debugCreatedAt: '2026-03-01T12:00:00Z',
    },
  ],
};
const CHOICE_ARGUMENTS = {
  expectedAdmin: DSO,
  transfer: {
    sender: PARTY,
    receiver: RECEIVER,
    amount: '10.0',
    instrumentId: { admin: DSO, id: 'Amulet' },
    requestedAt: '2026-03-01T11:59:00Z',
    executeBefore: '2026-03-02T12:00:00Z',
    inputHoldingCids: ['00ff06'],
    meta: { values: {} },
  },
  extraArgs: { context: { values: {} }, meta: { values: {} } },
};
const SUBMISSION = { party_id: PARTY, transaction: TX_B64, signed_tx_hash: SIG, public_key: PK };

// ---------------------------------------------------------------------------------------------
// One case per client method: exact verb, raw path, query, body; spec components of both sides.

interface Side {
  component: string;
  body: unknown;
}
interface Case {
  name: string;
  method: 'GET' | 'POST' | 'DELETE';
  /** Raw path relative to /api/validator, as the server must receive it. */
  path: string;
  /** The spec document and its path template; `mount` is where that document is served below /api/validator. */
  spec: OpenApiSpec;
  template: string;
  mount?: string;
  query?: Record<string, string>;
  /** Exact request body the client must send (and the spec component it must validate against). */
  request?: Side;
  /** Canned 200 body (and its spec component); absent = empty 200. */
  response?: Side;
  auth: 'admin' | 'proxy';
  call: (v: ValidatorClient) => Promise<unknown>;
}

const CASES: Case[] = [
  {
    name: 'generateTopology',
    method: 'POST',
    path: '/v0/admin/external-party/topology/generate',
    spec: validatorSpec,
    template: '/v0/admin/external-party/topology/generate',
    request: {
      component: 'GenerateExternalPartyTopologyRequest',
      body: { party_hint: 'alice', public_key: PK },
    },
    response: {
      component: 'GenerateExternalPartyTopologyResponse',
      body: { party_id: PARTY, topology_txs: [{ topology_tx: TOPO_B64, hash: HASH34 }] },
    },
    auth: 'admin',
    call: (v) => v.generateTopology({ party_hint: 'alice', public_key: PK }),
  },
  {
    name: 'submitTopology',
    method: 'POST',
    path: '/v0/admin/external-party/topology/submit',
    spec: validatorSpec,
    template: '/v0/admin/external-party/topology/submit',
    request: {
      component: 'SubmitExternalPartyTopologyRequest',
      body: { public_key: PK, signed_topology_txs: [{ topology_tx: TOPO_B64, signed_hash: SIG }] },
    },
    response: { component: 'SubmitExternalPartyTopologyResponse', body: { party_id: PARTY } },
    auth: 'admin',
    call: (v) =>
      v.submitTopology({
        public_key: PK,
        signed_topology_txs: [{ topology_tx: TOPO_B64, signed_hash: SIG }],
      }),
  },
  {
    name: 'createSetupProposal',
    method: 'POST',
    path: '/v0/admin/external-party/setup-proposal',
    spec: validatorSpec,
    template: '/v0/admin/external-party/setup-proposal',
    request: { component: 'CreateExternalPartySetupProposalRequest', body: { user_party_id: PARTY } },
    response: { component: 'CreateExternalPartySetupProposalResponse', body: { contract_id: '00aa01' } },
    auth: 'admin',
    call: (v) => v.createSetupProposal({ user_party_id: PARTY }),
  },
  {
    name: 'listSetupProposals',
    method: 'GET',
    path: '/v0/admin/external-party/setup-proposal',
    spec: validatorSpec,
    template: '/v0/admin/external-party/setup-proposal',
    response: { component: 'ListExternalPartySetupProposalsResponse', body: { contracts: [PROPOSAL] } },
    auth: 'admin',
    call: (v) => v.listSetupProposals(),
  },
  {
    name: 'prepareAcceptSetupProposal',
    method: 'POST',
    path: '/v0/admin/external-party/setup-proposal/prepare-accept',
    spec: validatorSpec,
    template: '/v0/admin/external-party/setup-proposal/prepare-accept',
    request: {
      component: 'PrepareAcceptExternalPartySetupProposalRequest',
      body: { contract_id: '00aa01', user_party_id: PARTY, verbose_hashing: false },
    },
    response: {
      component: 'PrepareAcceptExternalPartySetupProposalResponse',
      body: { transaction: TX_B64, tx_hash: HASH32 },
    },
    auth: 'admin',
    call: (v) =>
      v.prepareAcceptSetupProposal({ contract_id: '00aa01', user_party_id: PARTY, verbose_hashing: false }),
  },
  {
    name: 'submitAcceptSetupProposal',
    method: 'POST',
    path: '/v0/admin/external-party/setup-proposal/submit-accept',
    spec: validatorSpec,
    template: '/v0/admin/external-party/setup-proposal/submit-accept',
    request: { component: 'SubmitAcceptExternalPartySetupProposalRequest', body: { submission: SUBMISSION } },
    response: {
      component: 'SubmitAcceptExternalPartySetupProposalResponse',
      body: { transfer_preapproval_contract_id: '00bb02', update_id: '1220abcdef' },
    },
    auth: 'admin',
    call: (v) => v.submitAcceptSetupProposal({ submission: SUBMISSION }),
  },
  {
    name: 'prepareTransferPreapprovalSend',
    method: 'POST',
    path: '/v0/admin/external-party/transfer-preapproval/prepare-send',
    spec: validatorSpec,
    template: '/v0/admin/external-party/transfer-preapproval/prepare-send',
    request: {
      component: 'PrepareTransferPreapprovalSendRequest',
      body: {
        sender_party_id: PARTY,
        receiver_party_id: RECEIVER,
        amount: 12.5,
        expires_at: '2026-03-02T00:00:00.000Z',
        nonce: 7,
        description: 'invoice 42',
      },
    },
    response: {
      component: 'PrepareTransferPreapprovalSendResponse',
      body: {
        transaction: TX_B64,
        tx_hash: HASH32,
        transfer_command_contract_id_prefix: '00c0ffee',
        hashing_details: 'debug text',
      },
    },
    auth: 'admin',
    call: (v) =>
      v.prepareTransferPreapprovalSend({
        sender_party_id: PARTY,
        receiver_party_id: RECEIVER,
        amount: '12.50',
        expires_at: new Date('2026-03-02T00:00:00Z'),
        nonce: 7,
        description: 'invoice 42',
      }),
  },
  {
    name: 'submitTransferPreapprovalSend',
    method: 'POST',
    path: '/v0/admin/external-party/transfer-preapproval/submit-send',
    spec: validatorSpec,
    template: '/v0/admin/external-party/transfer-preapproval/submit-send',
    request: { component: 'SubmitTransferPreapprovalSendRequest', body: { submission: SUBMISSION } },
    response: { component: 'SubmitTransferPreapprovalSendResponse', body: { update_id: '1220feed' } },
    auth: 'admin',
    call: (v) => v.submitTransferPreapprovalSend({ submission: SUBMISSION }),
  },
  {
    name: 'externalPartyBalance',
    method: 'GET',
    path: '/v0/admin/external-party/balance',
    spec: validatorSpec,
    template: '/v0/admin/external-party/balance',
    query: { party_id: PARTY },
    response: { component: 'ExternalPartyBalanceResponse', body: { ...SUMMARY, computed_as_of_round: 4711 } },
    auth: 'admin',
    call: (v) => v.externalPartyBalance(PARTY),
  },
  {
    name: 'listTransferPreapprovals',
    method: 'GET',
    path: '/v0/admin/transfer-preapprovals',
    spec: validatorSpec,
    template: '/v0/admin/transfer-preapprovals',
    response: { component: 'ListTransferPreapprovalsResponse', body: { contracts: [PREAPPROVAL] } },
    auth: 'admin',
    call: (v) => v.listTransferPreapprovals(),
  },
  {
    name: 'lookupTransferPreapproval',
    method: 'GET',
    path: `/v0/admin/transfer-preapprovals/by-party/${enc(RECEIVER)}`,
    spec: validatorSpec,
    template: '/v0/admin/transfer-preapprovals/by-party/{receiver-party}',
    response: {
      component: 'LookupTransferPreapprovalByPartyResponse',
      body: { transfer_preapproval: PREAPPROVAL },
    },
    auth: 'admin',
    call: (v) => v.lookupTransferPreapproval(RECEIVER),
  },
  {
    name: 'cancelTransferPreapproval',
    method: 'DELETE',
    path: `/v0/admin/transfer-preapprovals/by-party/${enc(RECEIVER)}`,
    spec: validatorSpec,
    template: '/v0/admin/transfer-preapprovals/by-party/{receiver-party}',
    auth: 'admin',
    call: (v) => v.cancelTransferPreapproval(RECEIVER),
  },
  {
    name: 'listUsers',
    method: 'GET',
    path: '/v0/admin/users',
    spec: validatorSpec,
    template: '/v0/admin/users',
    response: { component: 'ListUsersResponse', body: { usernames: ['alice', 'validator-operator'] } },
    auth: 'admin',
    call: (v) => v.listUsers(),
  },
  {
    name: 'onboardUser',
    method: 'POST',
    path: '/v0/admin/users',
    spec: validatorSpec,
    template: '/v0/admin/users',
    request: {
      component: 'OnboardUserRequest',
      body: { name: 'alice', party_id: PARTY, createPartyIfMissing: false },
    },
    response: { component: 'OnboardUserResponse', body: { party_id: PARTY } },
    auth: 'admin',
    call: (v) => v.onboardUser({ name: 'alice', party_id: PARTY, createPartyIfMissing: false }),
  },
  {
    name: 'scanProxyOpenAndIssuingMiningRounds',
    method: 'GET',
    path: '/v0/scan-proxy/open-and-issuing-mining-rounds',
    spec: scanProxySpec,
    template: '/v0/scan-proxy/open-and-issuing-mining-rounds',
    response: {
      component: 'GetOpenAndIssuingMiningRoundsProxyResponse',
      body: {
        open_mining_rounds: [
          withState(
            contract('Splice.Round:OpenMiningRound', '00ab07', {
              dso: DSO,
              round: { number: '42' },
              opensAt: '2026-03-01T11:50:00Z',
              targetClosesAt: '2026-03-01T12:10:00Z',
            }),
          ),
        ],
        issuing_mining_rounds: [],
      },
    },
    auth: 'proxy',
    call: (v) => v.scanProxyOpenAndIssuingMiningRounds(),
  },
  {
    name: 'scanProxyDsoPartyId',
    method: 'GET',
    path: '/v0/scan-proxy/dso-party-id',
    spec: scanProxySpec,
    template: '/v0/scan-proxy/dso-party-id',
    response: { component: 'GetDsoPartyIdResponse', body: { dso_party_id: DSO } },
    auth: 'proxy',
    call: (v) => v.scanProxyDsoPartyId(),
  },
  {
    name: 'scanProxyTransferPreapproval',
    method: 'GET',
    path: `/v0/scan-proxy/transfer-preapprovals/by-party/${enc(RECEIVER)}`,
    spec: scanProxySpec,
    template: '/v0/scan-proxy/transfer-preapprovals/by-party/{party}',
    response: {
      component: 'LookupTransferPreapprovalByPartyResponse',
      body: { transfer_preapproval: PREAPPROVAL },
    },
    auth: 'proxy',
    call: (v) => v.scanProxyTransferPreapproval(RECEIVER),
  },
  {
    name: 'scanProxyTransferCommandCounter',
    method: 'GET',
    path: `/v0/scan-proxy/transfer-command-counter/${enc(PARTY)}`,
    spec: scanProxySpec,
    template: '/v0/scan-proxy/transfer-command-counter/{party}',
    response: {
      component: 'LookupTransferCommandCounterByPartyResponse',
      body: { transfer_command_counter: COUNTER },
    },
    auth: 'proxy',
    call: (v) => v.scanProxyTransferCommandCounter(PARTY),
  },
  {
    name: 'scanProxyTransferCommandStatus',
    method: 'GET',
    path: '/v0/scan-proxy/transfer-command/status',
    spec: scanProxySpec,
    template: '/v0/scan-proxy/transfer-command/status',
    query: { sender: PARTY, nonce: '7' },
    response: {
      component: 'LookupTransferCommandStatusResponse',
      body: {
        transfer_commands_by_contract_id: {
          '00c0ffee::suffix1': {
            contract: contract('Splice.ExternalPartyAmuletRules:TransferCommand', '00c0ffee::suffix1', {
              sender: PARTY,
              nonce: '7',
            }),
            status: { status: 'sent' },
          },
          '00c0ffee::suffix2': {
            contract: contract('Splice.ExternalPartyAmuletRules:TransferCommand', '00c0ffee::suffix2', {
              sender: PARTY,
              nonce: '7',
            }),
            status: { status: 'failed', failure_kind: 'expired', reason: 'expired before it was sent' },
          },
        },
      },
    },
    auth: 'proxy',
    call: (v) => v.scanProxyTransferCommandStatus({ sender: PARTY, nonce: 7 }),
  },
  {
    name: 'scanProxyAnsEntryByName',
    method: 'GET',
    path: `/v0/scan-proxy/ans-entries/by-name/${enc(ANS_ENTRY.name)}`,
    spec: scanProxySpec,
    template: '/v0/scan-proxy/ans-entries/by-name/{name}',
    response: { component: 'LookupEntryByNameResponse', body: { entry: ANS_ENTRY } },
    auth: 'proxy',
    call: (v) => v.scanProxyAnsEntryByName(ANS_ENTRY.name),
  },
  {
    name: 'scanProxyAnsEntryByParty',
    method: 'GET',
    path: `/v0/scan-proxy/ans-entries/by-party/${enc(PARTY)}`,
    spec: scanProxySpec,
    template: '/v0/scan-proxy/ans-entries/by-party/{party}',
    response: { component: 'LookupEntryByPartyResponse', body: { entry: ANS_ENTRY } },
    auth: 'proxy',
    call: (v) => v.scanProxyAnsEntryByParty(PARTY),
  },
  {
    name: 'scanProxyListAnsEntries',
    method: 'GET',
    path: '/v0/scan-proxy/ans-entries',
    spec: scanProxySpec,
    template: '/v0/scan-proxy/ans-entries',
    query: { name_prefix: 'ali', page_size: '20' },
    response: {
      component: 'ListEntriesResponse',
      body: {
        entries: [ANS_ENTRY, { user: DSO, name: 'dso.cns', url: '', description: 'DSO' }],
      },
    },
    auth: 'proxy',
    call: (v) => v.scanProxyListAnsEntries({ namePrefix: 'ali', pageSize: 20 }),
  },
  {
    name: 'scanProxyHoldingsSummary',
    method: 'POST',
    path: '/v0/scan-proxy/holdings/summary',
    spec: scanProxySpec,
    template: '/v0/scan-proxy/holdings/summary',
    request: {
      component: 'HoldingsSummaryRequest',
      body: {
        migration_id: 3,
        record_time: '2026-03-01T12:00:00Z',
        record_time_match: 'at_or_before',
        owner_party_ids: [PARTY],
      },
    },
    response: {
      component: 'HoldingsSummaryResponse',
      body: {
        record_time: '2026-03-01T12:00:00Z',
        migration_id: 3,
        computed_as_of_round: 4711,
        summaries: [SUMMARY],
      },
    },
    auth: 'proxy',
    call: (v) =>
      v.scanProxyHoldingsSummary({
        migration_id: 3,
        record_time: '2026-03-01T12:00:00Z',
        record_time_match: 'at_or_before',
        owner_party_ids: [PARTY],
      }),
  },
  {
    name: 'registry().getTransferFactory',
    method: 'POST',
    path: '/v0/scan-proxy/registry/transfer-instruction/v1/transfer-factory',
    spec: registrySpec,
    mount: '/v0/scan-proxy',
    template: '/registry/transfer-instruction/v1/transfer-factory',
    request: {
      component: 'GetFactoryRequest',
      body: { choiceArguments: CHOICE_ARGUMENTS, excludeDebugFields: true },
    },
    response: {
      component: 'TransferFactoryWithChoiceContext',
      body: { factoryId: '00fac7', transferKind: 'direct', choiceContext: CHOICE_CONTEXT },
    },
    auth: 'proxy',
    call: (v) =>
      v.registry().getTransferFactory({ choiceArguments: CHOICE_ARGUMENTS, excludeDebugFields: true }),
  },
  ...(['accept', 'reject', 'withdraw'] as const).map(
    (choice): Case => ({
      name: `registry().getTransferInstruction ${choice} context`,
      method: 'POST',
      path: `/v0/scan-proxy/registry/transfer-instruction/v1/${enc('00ab::cid/1')}/choice-contexts/${choice}`,
      spec: registrySpec,
      mount: '/v0/scan-proxy',
      template: `/registry/transfer-instruction/v1/{transferInstructionId}/choice-contexts/${choice}`,
      request: {
        component: 'GetChoiceContextRequest',
        body: { meta: { memo: 'x' }, excludeDebugFields: false },
      },
      response: { component: 'ChoiceContext', body: CHOICE_CONTEXT },
      auth: 'proxy',
      call: (v) => {
        const r = v.registry();
        const req = { meta: { memo: 'x' }, excludeDebugFields: false };
        if (choice === 'accept') return r.getTransferInstructionAcceptContext('00ab::cid/1', req);
        if (choice === 'reject') return r.getTransferInstructionRejectContext('00ab::cid/1', req);
        return r.getTransferInstructionWithdrawContext('00ab::cid/1', req);
      },
    }),
  ),
];

function ok(c: Case): Handler {
  return (res) => send(res, 200, c.response?.body);
}

const byName = (name: string): Case => {
  const c = CASES.find((x) => x.name === name);
  if (!c) throw new Error(`no case ${name}`);
  return c;
};

// ---------------------------------------------------------------------------------------------

describe('ValidatorClient: every method round-trips against the stub', () => {
  it.each(CASES.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const hits = server.route(c.method, c.path, ok(c));
    const result = await c.call(client());

    expect(hits).toHaveLength(1);
    const hit = hits[0]!;
    expect(hit.method).toBe(c.method);
    expect(hit.path).toBe(`${PREFIX}${c.path}`);
    expect(Object.fromEntries(hit.query)).toEqual(c.query ?? {});
    expect(hit.authorization).toBe(`Bearer ${c.auth === 'admin' ? ADMIN_TOKEN : PROXY_TOKEN}`);

    if (c.request) {
      expect(hit.contentType).toBe('application/json');
      const sent = JSON.parse(hit.body) as unknown;
      expect(sent).toEqual(c.request.body);
      expect(validateAgainst(c.spec, c.request.component, sent)).toEqual([]);
    } else {
      expect(hit.body).toBe('');
    }

    if (c.response) {
      expect(validateAgainst(c.spec, c.response.component, c.response.body)).toEqual([]);
      expect(result).toEqual(c.response.body);
    } else {
      expect(result).toBeUndefined();
    }
  });

  it('sends the amount as a JSON number whose text is the exact decimal', async () => {
    const c = byName('prepareTransferPreapprovalSend');
    const hits = server.route(c.method, c.path, ok(c));
    const v = client();
    const base = {
      sender_party_id: PARTY,
      receiver_party_id: RECEIVER,
      expires_at: '2026-03-02T00:00:00Z',
      nonce: 0,
    };
    await v.prepareTransferPreapprovalSend({ ...base, amount: '0.0000000001' });
    await v.prepareTransferPreapprovalSend({ ...base, amount: '123456.1234567891' });
    expect(hits[0]!.body).toContain('"amount":1e-10');
    expect(hits[1]!.body).toContain('"amount":123456.1234567891');
    for (const h of hits) {
      expect(
        validateAgainst(validatorSpec, 'PrepareTransferPreapprovalSendRequest', JSON.parse(h.body)),
      ).toEqual([]);
    }
    // More significant digits than a double carries, bad formats, zero: refused before sending.
    for (const amount of ['12345678901234567.5', '0.12345678901', '1e3', '-1', '0', '0.0', ' 1', '1.']) {
      await expect(v.prepareTransferPreapprovalSend({ ...base, amount })).rejects.toThrow(TypeError);
    }
    await expect(v.prepareTransferPreapprovalSend({ ...base, amount: '1', nonce: -1 })).rejects.toThrow(
      TypeError,
    );
    await expect(
      v.prepareTransferPreapprovalSend({ ...base, amount: '1', expires_at: 'tomorrow' }),
    ).rejects.toThrow(TypeError);
    expect(hits).toHaveLength(2);
  });

  it('refuses malformed keys, signatures and transactions before sending anything', async () => {
    const v = client();
    const before = server.allHits.length;
    await expect(v.generateTopology({ party_hint: 'alice', public_key: 'zz' })).rejects.toThrow(TypeError);
    await expect(v.generateTopology({ party_hint: 'a::b', public_key: PK })).rejects.toThrow(TypeError);
    await expect(v.submitTopology({ public_key: PK, signed_topology_txs: [] })).rejects.toThrow(TypeError);
    await expect(
      v.submitTopology({
        public_key: PK,
        signed_topology_txs: [{ topology_tx: TOPO_B64, signed_hash: 'ab' }],
      }),
    ).rejects.toThrow(TypeError);
    await expect(
      v.submitAcceptSetupProposal({ submission: { ...SUBMISSION, transaction: 'not base64!' } }),
    ).rejects.toThrow(TypeError);
    await expect(
      v.submitTransferPreapprovalSend({ submission: { ...SUBMISSION, public_key: `${PK}00` } }),
    ).rejects.toThrow(TypeError);
    await expect(v.lookupTransferPreapproval('')).rejects.toThrow(TypeError);
    await expect(v.scanProxyListAnsEntries({ pageSize: 0 })).rejects.toThrow(TypeError);
    expect(server.allHits.length).toBe(before);
  });

  it('drops fields the caller adds beyond the spec request', async () => {
    const c = byName('submitAcceptSetupProposal');
    const hits = server.route(c.method, c.path, ok(c));
    const extra = { ...SUBMISSION, note: 'not in the spec' } as typeof SUBMISSION;
    await client().submitAcceptSetupProposal({ submission: extra });
    const sent = JSON.parse(hits[0]!.body) as { submission: Record<string, unknown> };
    expect(sent).toEqual({ submission: SUBMISSION });
    expect(validateAgainst(validatorSpec, 'SubmitAcceptExternalPartySetupProposalRequest', sent)).toEqual([]);
  });
});

describe('ValidatorClient: Splice {error} responses', () => {
  it('404 with {error} surfaces as CantonApiError carrying the Splice text', async () => {
    const body = { error: `No TransferPreapproval found for party ${RECEIVER}` };
    expect(validateAgainst(validatorSpec, 'ErrorResponse', body)).toEqual([]);
    const hits = server.route('GET', `/v0/admin/transfer-preapprovals/by-party/${enc(RECEIVER)}`, (res) =>
      send(res, 404, body),
    );
    const e = await failure(client().lookupTransferPreapproval(RECEIVER));
    expect(e.status).toBe(404);
    expect(e.service).toBe('validator');
    expect(e.method).toBe('GET');
    expect(e.code).toBe('HTTP_404');
    expect(e.spliceError).toBe(body.error);
    expect(e.retryable).toBe(false);
    expect(e.message).not.toContain(ADMIN_TOKEN);
    expect(hits).toHaveLength(1);
  });

  it('409 on createSetupProposal (proposal already exists) is a CantonApiError, not retried, not ambiguous', async () => {
    const body = { error: 'ExternalPartySetupProposal contract 00aa01 already exists for this party' };
    expect(validateAgainst(validatorSpec, 'ErrorResponse', body)).toEqual([]);
    const hits = server.route('POST', '/v0/admin/external-party/setup-proposal', (res) =>
      send(res, 409, body),
    );
    const e = await failure(client().createSetupProposal({ user_party_id: PARTY }));
    expect(e.status).toBe(409);
    expect(e.spliceError).toBe(body.error);
    expect(e.ambiguous).toBe(false);
    expect(hits).toHaveLength(1);
  });

  it('404 on a scan-proxy lookup (no TransferCommandCounter) is raised, not turned into a value', async () => {
    const body = { error: `No TransferCommandCounter found for party ${PARTY}` };
    expect(validateAgainst(scanProxySpec, 'ErrorResponse', body)).toEqual([]);
    server.route('GET', `/v0/scan-proxy/transfer-command-counter/${enc(PARTY)}`, (res) =>
      send(res, 404, body),
    );
    const e = await failure(client().scanProxyTransferCommandCounter(PARTY));
    expect(e.status).toBe(404);
    expect(e.spliceError).toBe(body.error);
  });

  it('registry 404 / 409 carry service "registry"', async () => {
    const notFound = { error: 'TransferInstruction 00ab not found' };
    expect(validateAgainst(registrySpec, 'ErrorResponse', notFound)).toEqual([]);
    server.route(
      'POST',
      `/v0/scan-proxy/registry/transfer-instruction/v1/00ab/choice-contexts/accept`,
      (res) => send(res, 404, notFound),
    );
    const e404 = await failure(client().registry().getTransferInstructionAcceptContext('00ab'));
    expect(e404.service).toBe('registry');
    expect(e404.status).toBe(404);
    expect(e404.spliceError).toBe(notFound.error);

    const hits = server.route(
      'POST',
      '/v0/scan-proxy/registry/transfer-instruction/v1/transfer-factory',
      (res) => send(res, 409, { error: 'contract 00ee05 is being reassigned' }),
    );
    const e409 = await failure(client().registry().getTransferFactory({ choiceArguments: CHOICE_ARGUMENTS }));
    expect(e409.status).toBe(409);
    expect(e409.service).toBe('registry');
    expect(hits).toHaveLength(1);
  });

  it('a response that breaks the spec shape is refused as INVALID_RESPONSE', async () => {
    server.route('POST', '/v0/admin/external-party/setup-proposal/prepare-accept', (res) =>
      send(res, 200, { transaction: TX_B64 }),
    );
    const e = await failure(
      client().prepareAcceptSetupProposal({ contract_id: '00aa01', user_party_id: PARTY }),
    );
    expect(e.code).toBe('INVALID_RESPONSE');
    expect(e.message).toContain('tx_hash');
    expect(
      validateAgainst(validatorSpec, 'PrepareAcceptExternalPartySetupProposalResponse', {
        transaction: TX_B64,
      }),
    ).not.toEqual([]);
  });
});

describe('ValidatorClient: retries follow idempotency', () => {
  const UNAVAILABLE = { error: 'upstream unavailable' };

  /** 503 for the first `failures` hits, then the case's 200. */
  function flaky(c: Case, failures: number): Hit[] {
    return server.route(c.method, c.path, (res, _hit, n) =>
      n <= failures ? send(res, 503, UNAVAILABLE) : send(res, 200, c.response?.body),
    );
  }

  it.each([
    'submitTopology',
    'createSetupProposal',
    'submitAcceptSetupProposal',
    'submitTransferPreapprovalSend',
    'onboardUser',
  ])('%s is not retried on 503', async (name) => {
    const c = byName(name);
    const hits = flaky(c, 1);
    const e = await failure(c.call(client()));
    expect(e.status).toBe(503);
    expect(e.retryable).toBe(true); // safe for the server state in general …
    expect(hits).toHaveLength(1); // … but a write is never repeated by the client
  });

  it('a submit that hits the server request timeout (503 "taking too long") is ambiguous', async () => {
    const c = byName('submitAcceptSetupProposal');
    const hits = server.route(c.method, c.path, (res) =>
      send(res, 503, {
        error: 'The server is taking too long to respond to the request at the moment.',
      }),
    );
    const e = await failure(c.call(client()));
    expect(e.ambiguous).toBe(true);
    expect(hits).toHaveLength(1);
  });

  it.each([
    'generateTopology',
    'prepareAcceptSetupProposal',
    'prepareTransferPreapprovalSend',
    'listSetupProposals',
    'externalPartyBalance',
    'lookupTransferPreapproval',
    'cancelTransferPreapproval',
    'listUsers',
    'scanProxyDsoPartyId',
    'scanProxyOpenAndIssuingMiningRounds',
    'scanProxyTransferCommandStatus',
    'scanProxyHoldingsSummary',
    'registry().getTransferFactory',
    'registry().getTransferInstruction withdraw context',
  ])('%s is retried on 503 and then succeeds', async (name) => {
    const c = byName(name);
    const hits = flaky(c, 2);
    const result = await c.call(client());
    expect(hits).toHaveLength(3);
    expect(result).toEqual(c.response?.body);
    // Every attempt is the same request.
    expect(new Set(hits.map((h) => `${h.method} ${h.path} ${h.body}`)).size).toBe(1);
  });

  it('gives up after the configured attempts on a persistent 503', async () => {
    const c = byName('prepareAcceptSetupProposal');
    const hits = flaky(c, 99);
    const e = await failure(c.call(client()));
    expect(e.status).toBe(503);
    expect(hits).toHaveLength(3);
  });
});

describe('ValidatorClient: every path and verb it uses exists in the published documents', () => {
  const templateRegex = (t: string) =>
    new RegExp(`^${t.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^/}]+\}/g, '[^/]+')}$`);

  it.each(CASES.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const op = (c.spec.paths as Record<string, Record<string, unknown>>)[c.template]?.[
      c.method.toLowerCase()
    ] as
      | {
          requestBody?: { content: Record<string, { schema: { $ref: string } }> };
          responses: Record<string, { content?: Record<string, { schema: { $ref: string } }> }>;
          parameters?: { in: string; name: string; required?: boolean }[];
        }
      | undefined;
    expect(op, `${c.method} ${c.template} in ${SPEC_NAME.get(c.spec)}`).toBeDefined();
    expect(`${c.path}`).toMatch(templateRegex(`${c.mount ?? ''}${c.template}`));

    // The components we validate against are the ones the operation declares.
    const reqRef = op!.requestBody?.content['application/json']?.schema.$ref;
    expect(reqRef).toBe(c.request ? `#/components/schemas/${c.request.component}` : undefined);
    const resRef = op!.responses['200']?.content?.['application/json']?.schema.$ref;
    expect(resRef).toBe(c.response ? `#/components/schemas/${c.response.component}` : undefined);

    // Query parameters: exactly the declared ones, all required ones present.
    const declared = (op!.parameters ?? []).filter((p) => p.in === 'query');
    for (const k of Object.keys(c.query ?? {})) expect(declared.map((p) => p.name)).toContain(k);
    for (const p of declared.filter((p) => p.required)) expect(Object.keys(c.query ?? {})).toContain(p.name);
  });

  it('every request the client sent in this file matches one of those operations', () => {
    const sent = server.allHits.filter((h) => h.path.startsWith(PREFIX));
    expect(sent.length).toBeGreaterThan(CASES.length);
    for (const h of sent) {
      const path = h.path.slice(PREFIX.length);
      const match = CASES.find(
        (c) => c.method === h.method && templateRegex(`${c.mount ?? ''}${c.template}`).test(path),
      );
      expect(match, `${h.method} ${path}`).toBeDefined();
    }
    // And all client methods were exercised.
    const names = new Set(CASES.map((c) => c.name));
    expect(names.size).toBe(CASES.length);
    expect(CASES.filter((c) => c.spec === validatorSpec).length).toBe(14);
    expect(CASES.filter((c) => c.spec === scanProxySpec).length).toBe(9);
    expect(CASES.filter((c) => c.spec === registrySpec).length).toBe(4);
  });
});
