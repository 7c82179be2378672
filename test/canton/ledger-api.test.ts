import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { staticBearer } from '../../src/canton/auth.js';
import { CantonApiError } from '../../src/canton/errors.js';
import {
  LEDGER_API_ENDPOINTS,
  LEDGER_API_READERS,
  LedgerApiClient,
  type LedgerApiOperation,
  LedgerApiRequestError,
} from '../../src/canton/ledger-api/client.js';
import type {
  AllocateExternalPartyRequest,
  CompletionStreamRequest,
  EventFormat,
  GenerateExternalPartyTopologyRequest,
  GetActiveContractsRequest,
  GetUpdateByOffsetRequest,
  JsCommands,
  JsExecuteSubmissionAndWaitForTransactionRequest,
  JsExecuteSubmissionRequest,
  JsPrepareSubmissionRequest,
  RightRequest,
  Signature,
  SubmitAndWaitForReassignmentRequest,
} from '../../src/canton/ledger-api/schemas.js';
import { loadSpec, type OpenApiSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';
import { type StubServer, startStubServer } from '../support/stub-server.js';

const spec = loadSpec(join(SPECS_DIR, 'canton-ledger-api/openapi-3.5.1.yaml'));
const spec3412 = loadSpec(join(SPECS_DIR, 'canton-ledger-api/openapi-3.4.12.yaml'));

// ---------------------------------------------------------------------------------------------
// Local stub participant: routes by "METHOD raw-path"; replies are used in order, the last repeats.

let server: StubServer;

beforeAll(async () => {
  server = await startStubServer();
});

afterAll(() => server.close());

afterEach(() => {
  server.reset();
});

function client(extra: Partial<ConstructorParameters<typeof LedgerApiClient>[0]> = {}): LedgerApiClient {
  return new LedgerApiClient({
    baseUrl: server.baseUrl,
    timeoutMs: 5000,
    retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 5 },
    ...extra,
  });
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
}

/** Deep copy without the keys the response schemas drop on purpose (protobuf codec artefacts). */
function withoutKeys(v: unknown, keys: string[]): unknown {
  if (Array.isArray(v)) return v.map((x) => withoutKeys(x, keys));
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v)
        .filter(([k]) => !keys.includes(k))
        .map(([k, x]) => [k, withoutKeys(x, keys)]),
    );
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// Canned data (spec-true: every request and response is validated against 3.5.1 below)

const b64 = (s: string) => Buffer.from(s).toString('base64');
const FP = '1220205057e331cc8929dd217e2f8e63f503b7081773de60d01fb46839700bc5caaa';
const PARTY = `alice::${FP}`;
const OPERATOR = `operator::1220${'0f'.repeat(32)}`;
const DSO = `DSO::1220${'de'.repeat(32)}`;
const SYNC = `global-domain::1220${'ab'.repeat(32)}`;
const SYNC2 = `private-sync::1220${'ac'.repeat(32)}`;
const PARTICIPANT = `PAR::participant1::1220${'cd'.repeat(32)}`;
const UPDATE_ID = `1220${'5a'.repeat(32)}`;
const CID = `00${'ef'.repeat(33)}`;
const CID2 = `00${'e1'.repeat(33)}`;
const USER = 'custody-svc';
const PREPARED_TX = b64('protobuf PreparedTransaction bytes');
const TX_HASH = Buffer.alloc(32, 7).toString('base64');
const MULTI_HASH = Buffer.concat([Buffer.from([0x12, 0x20]), Buffer.alloc(32, 3)]).toString('base64');
const T0 = '2025-06-01T12:00:00.123456Z';
const HOLDING = '#splice-api-token-holding-v1:Splice.Api.Token.HoldingV1:Holding';
const AMULET = 'a1b2c3:Splice.Amulet:Amulet';

const ed25519Sig: Signature = {
  format: 'SIGNATURE_FORMAT_CONCAT',
  signature: Buffer.alloc(64, 9).toString('base64'),
  signedBy: FP,
  signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_ED25519',
};

const createdEvent = {
  offset: 42,
  nodeId: 1,
  contractId: CID2,
  templateId: AMULET,
  contractKey: null,
  createArgument: {
    dso: DSO,
    owner: PARTY,
    amount: { initialAmount: '10.0000000000', createdAt: { number: '7' } },
  },
  createdEventBlob: b64('created event blob'),
  interfaceViews: [
    {
      interfaceId: HOLDING.replace('#splice-api-token-holding-v1', 'h0ld1ng'),
      viewStatus: { code: 0, message: '', details: [] },
      viewValue: { owner: PARTY, amount: '10.0000000000' },
      implementationPackageId: 'a1b2c3',
    },
  ],
  witnessParties: [PARTY],
  signatories: [DSO, PARTY],
  observers: [],
  createdAt: T0,
  packageName: 'splice-amulet',
  representativePackageId: 'a1b2c3',
  acsDelta: true,
};

const exercisedEvent = {
  offset: 42,
  nodeId: 0,
  contractId: CID,
  templateId: 'f00d:Splice.ExternalPartyAmuletRules:ExternalPartyAmuletRules',
  interfaceId: 'beef:Splice.Api.Token.TransferInstructionV1:TransferFactory',
  choice: 'TransferFactory_Transfer',
  choiceArgument: { expectedAdmin: DSO },
  actingParties: [PARTY],
  consuming: false,
  witnessParties: [PARTY],
  lastDescendantNodeId: 1,
  exerciseResult: { output: { tag: 'TransferInstructionResult_Completed', value: {} } },
  packageName: 'splice-amulet',
  implementedInterfaces: [],
  acsDelta: false,
};

const transaction = {
  updateId: UPDATE_ID,
  commandId: 'cmd-1',
  workflowId: '',
  effectiveAt: T0,
  events: [{ ExercisedEvent: exercisedEvent }, { CreatedEvent: createdEvent }],
  offset: 42,
  synchronizerId: SYNC,
  traceContext: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
  recordTime: T0,
  externalTransactionHash: TX_HASH,
  paidTrafficCost: 1800,
};

const unassignedEvent = {
  reassignmentId: 'r-1',
  contractId: CID2,
  templateId: AMULET,
  source: SYNC,
  target: SYNC2,
  submitter: OPERATOR,
  reassignmentCounter: 1,
  assignmentExclusivity: T0,
  witnessParties: [OPERATOR],
  packageName: 'splice-amulet',
  offset: 45,
  nodeId: 0,
};

const partyFilter: EventFormat = {
  filtersByParty: {
    [PARTY]: {
      cumulative: [
        {
          identifierFilter: {
            InterfaceFilter: {
              value: { interfaceId: HOLDING, includeInterfaceView: true, includeCreatedEventBlob: true },
            },
          },
        },
        { identifierFilter: { TemplateFilter: { value: { templateId: AMULET } } } },
      ],
    },
  },
  verbose: false,
};

const wildcard: EventFormat = {
  filtersForAnyParty: {
    cumulative: [{ identifierFilter: { WildcardFilter: { value: { includeCreatedEventBlob: false } } } }],
  },
};

const prepareReq: JsPrepareSubmissionRequest = {
  userId: USER,
  commandId: 'cmd-1',
  commands: [
    {
      ExerciseCommand: {
        templateId:
          '#splice-api-token-transfer-instruction-v1:Splice.Api.Token.TransferInstructionV1:TransferFactory',
        contractId: CID,
        choice: 'TransferFactory_Transfer',
        choiceArgument: {
          expectedAdmin: DSO,
          transfer: { sender: PARTY, receiver: OPERATOR, amount: '5.0000000000', meta: { values: {} } },
          extraArgs: { context: { values: {} }, meta: { values: {} } },
        },
      },
    },
  ],
  minLedgerTime: { time: { MinLedgerTimeRel: { value: { seconds: 5, nanos: 0 } } } },
  actAs: [PARTY],
  readAs: [],
  disclosedContracts: [
    {
      templateId: AMULET,
      contractId: CID2,
      createdEventBlob: b64('created event blob'),
      synchronizerId: SYNC,
    },
  ],
  synchronizerId: SYNC,
  verboseHashing: false,
  maxRecordTime: '2025-06-01T13:00:00Z',
  estimateTrafficCost: { disabled: false, expectedSignatures: ['SIGNING_ALGORITHM_SPEC_ED25519'] },
  hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V3',
};

const prepareRes = {
  preparedTransaction: PREPARED_TX,
  preparedTransactionHash: TX_HASH,
  hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V3',
  costEstimation: {
    estimationTimestamp: T0,
    confirmationRequestTrafficCostEstimation: 1500,
    confirmationResponseTrafficCostEstimation: 300,
    totalTrafficCostEstimation: 1800,
  },
};

const executeReq: JsExecuteSubmissionRequest = {
  preparedTransaction: PREPARED_TX,
  partySignatures: { signatures: [{ party: PARTY, signatures: [ed25519Sig] }] },
  deduplicationPeriod: { DeduplicationDuration: { value: { seconds: 600, nanos: 0 } } },
  submissionId: 'sub-1',
  userId: USER,
  hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
};

const executeAndWaitReq: JsExecuteSubmissionRequest = {
  ...executeReq,
  submissionId: 'sub-2',
  deduplicationPeriod: { Empty: {} },
  minLedgerTime: { time: { MinLedgerTimeAbs: { value: '2025-06-01T12:00:00Z' } } },
};

const executeForTxReq: JsExecuteSubmissionAndWaitForTransactionRequest = {
  ...executeReq,
  submissionId: 'sub-3',
  deduplicationPeriod: { DeduplicationOffset: { value: 40 } },
  transactionFormat: { eventFormat: wildcard, transactionShape: 'TRANSACTION_SHAPE_LEDGER_EFFECTS' },
};

const topologyReq: GenerateExternalPartyTopologyRequest = {
  synchronizer: SYNC,
  partyHint: 'alice',
  publicKey: {
    format: 'CRYPTO_KEY_FORMAT_RAW',
    keyData: '2RwUiIHVUVdulxzD8NKtPmIaaBqMer1A90rDjoklJPY=',
    keySpec: 'SIGNING_KEY_SPEC_EC_CURVE25519',
  },
  localParticipantObservationOnly: false,
  otherConfirmingParticipantUids: [],
  confirmationThreshold: 1,
  observingParticipantUids: [],
};

const allocateReq: AllocateExternalPartyRequest = {
  synchronizer: SYNC,
  onboardingTransactions: [{ transaction: b64('party to participant') }],
  multiHashSignatures: [ed25519Sig],
  identityProviderId: '',
  waitForAllocation: true,
  userId: USER,
};

const commandsReq: JsCommands = {
  commands: [{ CreateCommand: { templateId: AMULET, createArguments: { dso: DSO, owner: OPERATOR } } }],
  commandId: 'cmd-2',
  actAs: [OPERATOR],
  userId: USER,
  readAs: [],
  workflowId: 'wf-1',
  deduplicationPeriod: { DeduplicationDuration: { value: { seconds: 60, nanos: 0 } } },
  minLedgerTimeRel: { seconds: 1, nanos: 500 },
  submissionId: 'sub-4',
  synchronizerId: SYNC,
};

const reassignReq: SubmitAndWaitForReassignmentRequest = {
  reassignmentCommands: {
    commandId: 'cmd-3',
    submitter: OPERATOR,
    userId: USER,
    commands: [
      { command: { UnassignCommand: { value: { contractId: CID2, source: SYNC, target: SYNC2 } } } },
    ],
  },
  eventFormat: wildcard,
};

const updateReq: GetUpdateByOffsetRequest = {
  offset: 42,
  updateFormat: {
    includeTransactions: { eventFormat: partyFilter, transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA' },
    includeReassignments: partyFilter,
    includeTopologyEvents: { includeParticipantAuthorizationEvents: { parties: [PARTY] } },
  },
};

const acsReq: GetActiveContractsRequest = { activeAtOffset: 42, eventFormat: partyFilter };

const completionsReq: CompletionStreamRequest = { userId: USER, parties: [PARTY], beginExclusive: 41 };

const grantRights: RightRequest[] = [
  { kind: { CanExecuteAs: { value: { party: PARTY } } } },
  { kind: { CanReadAs: { value: { party: PARTY } } } },
];
const revokeRights: RightRequest[] = [{ kind: { CanActAs: { value: { party: PARTY } } } }];

// ---------------------------------------------------------------------------------------------
// One case per client method

interface Case {
  op: LedgerApiOperation;
  /** Spec component of the request body (none for GET). */
  requestComponent?: string;
  /** Spec component of the 200 body, or of its items when `list`. */
  responseComponent: string;
  list?: boolean;
  call: (c: LedgerApiClient) => Promise<unknown>;
  /** Body the server must receive. */
  body?: unknown;
  /** Concrete path when the template has placeholders. */
  path?: string;
  query?: Record<string, string>;
  canned: unknown;
  /** What the method resolves to; default `canned`. */
  expected?: unknown;
}

const cases: Case[] = [
  {
    op: 'prepare',
    requestComponent: 'JsPrepareSubmissionRequest',
    responseComponent: 'JsPrepareSubmissionResponse',
    call: (c) => c.prepare(prepareReq),
    body: prepareReq,
    canned: prepareRes,
  },
  {
    op: 'execute',
    requestComponent: 'JsExecuteSubmissionRequest',
    responseComponent: 'ExecuteSubmissionResponse',
    call: (c) => c.execute(executeReq),
    body: executeReq,
    canned: {},
  },
  {
    op: 'executeAndWait',
    requestComponent: 'JsExecuteSubmissionAndWaitRequest',
    responseComponent: 'ExecuteSubmissionAndWaitResponse',
    call: (c) => c.executeAndWait(executeAndWaitReq),
    body: executeAndWaitReq,
    canned: { updateId: UPDATE_ID, completionOffset: 43 },
  },
  {
    op: 'executeAndWaitForTransaction',
    requestComponent: 'JsExecuteSubmissionAndWaitForTransactionRequest',
    responseComponent: 'JsExecuteSubmissionAndWaitForTransactionResponse',
    call: (c) => c.executeAndWaitForTransaction(executeForTxReq),
    body: executeForTxReq,
    canned: { transaction },
  },
  {
    op: 'generateExternalPartyTopology',
    requestComponent: 'GenerateExternalPartyTopologyRequest',
    responseComponent: 'GenerateExternalPartyTopologyResponse',
    call: (c) => c.generateExternalPartyTopology(topologyReq),
    body: topologyReq,
    canned: {
      partyId: PARTY,
      publicKeyFingerprint: FP,
      topologyTransactions: [b64('party to participant')],
      multiHash: MULTI_HASH,
    },
  },
  {
    op: 'allocateExternalParty',
    requestComponent: 'AllocateExternalPartyRequest',
    responseComponent: 'AllocateExternalPartyResponse',
    call: (c) => c.allocateExternalParty(allocateReq),
    body: allocateReq,
    canned: { partyId: PARTY },
  },
  {
    op: 'submitAndWaitForTransactionTree',
    requestComponent: 'JsCommands',
    responseComponent: 'JsSubmitAndWaitForTransactionTreeResponse',
    call: (c) => c.submitAndWaitForTransactionTree(commandsReq),
    body: commandsReq,
    canned: {
      transactionTree: {
        updateId: UPDATE_ID,
        commandId: 'cmd-2',
        workflowId: 'wf-1',
        effectiveAt: T0,
        offset: 44,
        eventsById: {
          '0': { ExercisedTreeEvent: { value: exercisedEvent } },
          '1': { CreatedTreeEvent: { value: createdEvent } },
        },
        synchronizerId: SYNC,
        recordTime: T0,
      },
    },
  },
  {
    op: 'submitAndWaitForReassignment',
    requestComponent: 'SubmitAndWaitForReassignmentRequest',
    responseComponent: 'JsSubmitAndWaitForReassignmentResponse',
    call: (c) => c.submitAndWaitForReassignment(reassignReq),
    body: reassignReq,
    canned: {
      reassignment: {
        updateId: UPDATE_ID,
        commandId: 'cmd-3',
        offset: 45,
        events: [
          { JsUnassignedEvent: { value: unassignedEvent } },
          {
            JsAssignmentEvent: {
              source: SYNC,
              target: SYNC2,
              reassignmentId: 'r-1',
              submitter: OPERATOR,
              reassignmentCounter: 1,
              createdEvent,
            },
          },
        ],
        recordTime: T0,
        synchronizerId: SYNC2,
      },
    },
  },
  {
    op: 'updateByOffset',
    requestComponent: 'GetUpdateByOffsetRequest',
    responseComponent: 'JsGetUpdateResponse',
    call: (c) => c.updateByOffset(updateReq),
    body: updateReq,
    canned: { update: { Transaction: { value: transaction } } },
  },
  {
    op: 'updates',
    requestComponent: 'GetUpdatesRequest',
    responseComponent: 'JsGetUpdatesResponse',
    list: true,
    call: (c) =>
      c.updates(
        { beginExclusive: 41, endInclusive: 42, updateFormat: updateReq.updateFormat },
        { limit: 10, streamIdleTimeoutMs: 200 },
      ),
    body: { beginExclusive: 41, endInclusive: 42, updateFormat: updateReq.updateFormat },
    query: { limit: '10', stream_idle_timeout_ms: '200' },
    canned: [{ update: { Transaction: { value: transaction } } }],
  },
  {
    op: 'ledgerEnd',
    responseComponent: 'GetLedgerEndResponse',
    call: (c) => c.ledgerEnd(),
    canned: { offset: 42 },
  },
  {
    op: 'activeContracts',
    requestComponent: 'GetActiveContractsRequest',
    responseComponent: 'JsGetActiveContractsResponse',
    list: true,
    call: (c) => c.activeContracts(acsReq, { limit: 100 }),
    body: acsReq,
    query: { limit: '100' },
    canned: [
      {
        workflowId: '',
        contractEntry: { JsActiveContract: { createdEvent, synchronizerId: SYNC, reassignmentCounter: 0 } },
      },
      {
        contractEntry: {
          JsIncompleteUnassigned: { createdEvent, unassignedEvent },
        },
      },
      {
        contractEntry: {
          JsIncompleteAssigned: {
            assignedEvent: {
              source: SYNC2,
              target: SYNC,
              reassignmentId: 'r-2',
              reassignmentCounter: 2,
              createdEvent,
            },
          },
        },
      },
    ],
  },
  {
    op: 'connectedSynchronizers',
    responseComponent: 'GetConnectedSynchronizersResponse',
    call: (c) => c.connectedSynchronizers({ party: PARTY }),
    query: { party: PARTY },
    canned: {
      connectedSynchronizers: [
        {
          synchronizerAlias: 'global',
          synchronizerId: SYNC,
          permission: 'PARTICIPANT_PERMISSION_CONFIRMATION',
        },
        { synchronizerAlias: 'private', synchronizerId: SYNC2 },
      ],
    },
  },
  {
    op: 'participantId',
    responseComponent: 'GetParticipantIdResponse',
    call: (c) => c.participantId(),
    canned: { participantId: PARTICIPANT },
  },
  {
    op: 'authenticatedUser',
    responseComponent: 'GetUserResponse',
    call: (c) => c.authenticatedUser(),
    canned: {
      user: {
        id: USER,
        primaryParty: PARTY,
        isDeactivated: false,
        metadata: { resourceVersion: '1', annotations: {} },
        identityProviderId: '',
      },
    },
  },
  {
    op: 'listUserRights',
    responseComponent: 'ListUserRightsResponse',
    call: (c) => c.listUserRights(USER),
    path: `/v2/users/${USER}/rights`,
    canned: {
      rights: [
        { kind: { CanActAs: { value: { party: PARTY } } } },
        { kind: { CanExecuteAs: { value: { party: PARTY } } } },
        { kind: { CanReadAsAnyParty: { value: {} } } },
        { kind: { CanExecuteAsAnyParty: { value: {} } } },
        { kind: { ParticipantAdmin: { value: {} } } },
        { kind: { IdentityProviderAdmin: { value: {} } } },
      ],
    },
  },
  {
    op: 'grantUserRights',
    requestComponent: 'GrantUserRightsRequest',
    responseComponent: 'GrantUserRightsResponse',
    call: (c) => c.grantUserRights(USER, grantRights),
    path: `/v2/users/${USER}/rights`,
    body: { userId: USER, rights: grantRights },
    canned: { newlyGrantedRights: grantRights },
  },
  {
    op: 'revokeUserRights',
    requestComponent: 'RevokeUserRightsRequest',
    responseComponent: 'RevokeUserRightsResponse',
    call: (c) => c.revokeUserRights(USER, revokeRights, { identityProviderId: '' }),
    path: `/v2/users/${USER}/rights`,
    body: { userId: USER, rights: revokeRights, identityProviderId: '' },
    canned: { newlyRevokedRights: revokeRights },
  },
  {
    op: 'completions',
    requestComponent: 'CompletionStreamRequest',
    responseComponent: 'CompletionStreamResponse',
    list: true,
    call: (c) => c.completions(completionsReq, { limit: 10, streamIdleTimeoutMs: 200 }),
    body: completionsReq,
    query: { limit: '10', stream_idle_timeout_ms: '200' },
    canned: [
      {
        completionResponse: {
          Completion: {
            value: {
              commandId: 'cmd-1',
              status: { code: 0, message: '', details: [] },
              updateId: UPDATE_ID,
              userId: USER,
              actAs: [PARTY],
              submissionId: 'sub-1',
              deduplicationPeriod: { DeduplicationDuration: { value: { seconds: 600, nanos: 0 } } },
              offset: 43,
              synchronizerTime: { synchronizerId: SYNC, recordTime: T0 },
              paidTrafficCost: 1800,
            },
          },
        },
      },
      {
        completionResponse: {
          Completion: {
            value: {
              commandId: 'cmd-9',
              status: {
                code: 6,
                message:
                  'DUPLICATE_COMMAND(10,0): A command with the given command id has already been successfully processed',
                details: [
                  {
                    typeUrl: 'type.googleapis.com/google.rpc.ErrorInfo',
                    value: b64('error info'),
                    unknownFields: { fields: {} },
                  },
                ],
              },
              userId: USER,
              actAs: [PARTY],
              submissionId: 'sub-9',
              deduplicationPeriod: { DeduplicationOffset: { value: 12 } },
              offset: 44,
              synchronizerTime: { synchronizerId: SYNC, recordTime: T0 },
            },
          },
        },
      },
      {
        completionResponse: {
          OffsetCheckpoint: {
            value: { offset: 45, synchronizerTimes: [{ synchronizerId: SYNC, recordTime: T0 }] },
          },
        },
      },
    ],
  },
];
// ProtoAny.unknownFields is a scalapb artefact the schema drops.
const completionsCase = cases.find((c) => c.op === 'completions')!;
completionsCase.expected = withoutKeys(completionsCase.canned, ['unknownFields']);

function endpointOf(c: Case) {
  const ep = LEDGER_API_ENDPOINTS[c.op];
  return { ...ep, concretePath: c.path ?? ep.path };
}

type Op = { requestBody?: unknown; responses?: Record<string, unknown>; parameters?: unknown[] };

function specOperation(s: OpenApiSpec, path: string, method: string): Op | undefined {
  const paths = s.paths as Record<string, Record<string, Op>> | undefined;
  return paths?.[path]?.[method.toLowerCase()];
}

function refName(schema: unknown): string | undefined {
  const ref = (schema as { $ref?: unknown } | undefined)?.$ref;
  return typeof ref === 'string' ? ref.split('/').pop() : undefined;
}

function jsonSchemaOf(x: unknown): unknown {
  return (x as { content?: { 'application/json'?: { schema?: unknown } } } | undefined)?.content?.[
    'application/json'
  ]?.schema;
}

// ---------------------------------------------------------------------------------------------

describe('LedgerApiClient endpoints against the published spec', () => {
  it('covers every client method with a case and an endpoint entry', () => {
    const methods = Object.getOwnPropertyNames(LedgerApiClient.prototype).filter(
      (m) => m !== 'constructor' && m !== 'call' && !(m in LEDGER_API_READERS),
    );
    expect(new Set(methods)).toEqual(new Set(Object.keys(LEDGER_API_ENDPOINTS)));
    expect(new Set(cases.map((c) => c.op))).toEqual(new Set(Object.keys(LEDGER_API_ENDPOINTS)));
  });

  for (const [op, ep] of Object.entries(LEDGER_API_ENDPOINTS)) {
    it(`${op}: ${ep.method} ${ep.path} exists in 3.5.1 and 3.4.12, with the components we validate`, () => {
      const c = cases.find((x) => x.op === op)!;
      for (const s of [spec, spec3412]) {
        const operation = specOperation(s, ep.path, ep.method);
        expect(operation, `${s.openapi} ${ep.method} ${ep.path}`).toBeDefined();
        const reqSchema = jsonSchemaOf(operation?.requestBody);
        expect(refName(reqSchema)).toBe(c.requestComponent);
        const resSchema = jsonSchemaOf(operation?.responses?.['200']) as
          | { type?: string; items?: unknown }
          | undefined;
        if (c.list) {
          expect(resSchema?.type).toBe('array');
          expect(refName(resSchema?.items)).toBe(c.responseComponent);
        } else {
          expect(refName(resSchema)).toBe(c.responseComponent);
        }
      }
    });
  }

  it('sends only query parameters the spec declares', () => {
    for (const c of cases) {
      const ep = LEDGER_API_ENDPOINTS[c.op];
      const params = (specOperation(spec, ep.path, ep.method)?.parameters ?? []) as {
        name: string;
        in: string;
      }[];
      const declared = params.filter((p) => p.in === 'query').map((p) => p.name);
      for (const k of Object.keys(c.query ?? {})) expect(declared, `${c.op} ?${k}`).toContain(k);
    }
  });
});

describe('LedgerApiClient round trips (stub participant)', () => {
  for (const c of cases) {
    it(`${c.op}: request and response are spec-true and round-trip`, async () => {
      // The canned response is what a 3.5.1 participant may send.
      const items = c.list ? (c.canned as unknown[]) : [c.canned];
      for (const item of items) expect(validateAgainst(spec, c.responseComponent, item)).toEqual([]);

      const ep = endpointOf(c);
      const hits = server.route(ep.method, ep.concretePath, { status: 200, body: c.canned });
      const result = await c.call(client({ auth: staticBearer('test-token') }));
      expect(result).toEqual(c.expected ?? c.canned);

      expect(hits).toHaveLength(1);
      const hit = hits[0]!;
      expect(hit.method).toBe(ep.method);
      expect(hit.path).toBe(ep.concretePath);
      expect(hit.headers.authorization).toBe('Bearer test-token');
      expect(Object.fromEntries(hit.query)).toEqual(c.query ?? {});
      if (c.requestComponent === undefined) {
        expect(hit.body).toBe('');
      } else {
        expect(hit.headers['content-type']).toBe('application/json');
        const sent = JSON.parse(hit.body) as unknown;
        expect(sent).toEqual(c.body);
        expect(validateAgainst(spec, c.requestComponent, sent)).toEqual([]);
        // Older participants: the 3.4.12 component accepts it too (it ignores fields it lacks).
        expect(validateAgainst(spec3412, c.requestComponent, sent)).toEqual([]);
      }
    });
  }

  it('joins paths under a base URL with a path prefix', async () => {
    const hits = server.route('GET', '/participant1/v2/state/ledger-end', {
      status: 200,
      body: { offset: 7 },
    });
    const c = client({ baseUrl: `${server.baseUrl}/participant1/` });
    await expect(c.ledgerEnd()).resolves.toEqual({ offset: 7 });
    expect(hits).toHaveLength(1);
  });

  it('percent-encodes the user id as one path segment', async () => {
    const hits = server.route('GET', '/v2/users/svc%2Fa%40b%3A%3Ac/rights', {
      status: 200,
      body: { rights: [] },
    });
    await expect(client().listUserRights('svc/a@b::c')).resolves.toEqual({ rights: [] });
    expect(hits).toHaveLength(1);
  });

  it('raises the HTTP timeout above the stream idle timeout of list calls', async () => {
    // The reply comes after 300 ms: the 100 ms client timeout alone would abort it.
    const hits = server.route('POST', '/v2/commands/completions', { status: 200, body: [] });
    const slow = new LedgerApiClient({
      baseUrl: server.baseUrl,
      timeoutMs: 100,
      retry: { attempts: 1 },
      fetch: async (input, init) => {
        await new Promise((r) => setTimeout(r, 300));
        return fetch(input, init);
      },
    });
    await expect(slow.completions(completionsReq, { streamIdleTimeoutMs: 250 })).resolves.toEqual([]);
    expect(hits[0]?.query.get('stream_idle_timeout_ms')).toBe('250');
    const err = await rejection(slow.completions(completionsReq));
    expect(err).toBeInstanceOf(CantonApiError);
    expect((err as CantonApiError).code).toBe('TIMEOUT');
  });
});

describe('LedgerApiClient responses: tolerance and refusals', () => {
  it('drops unknown fields and reads null optional fields (circe None) as absent', async () => {
    const body = {
      ...prepareRes,
      hashingDetails: null,
      costEstimation: null,
      someFutureField: { nested: true },
    };
    server.route('POST', '/v2/interactive-submission/prepare', { status: 200, body });
    const res = await client().prepare(prepareReq);
    expect(res).toEqual({
      preparedTransaction: PREPARED_TX,
      preparedTransactionHash: TX_HASH,
      hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V3',
    });
    expect(res.costEstimation).toBeUndefined();
    expect(Object.hasOwn(res, 'someFutureField')).toBe(false);

    const tx = {
      ...transaction,
      traceContext: null,
      commandId: null,
      newTopLevel: 1,
      events: [{ CreatedEvent: { ...createdEvent, observers: null, interfaceViews: null, extra: 'x' } }],
    };
    server.route('POST', '/v2/interactive-submission/executeAndWaitForTransaction', {
      status: 200,
      body: { transaction: tx },
    });
    const { transaction: parsed } = await client().executeAndWaitForTransaction(executeForTxReq);
    expect(parsed.traceContext).toBeUndefined();
    expect(parsed.commandId).toBeUndefined();
    const ev = parsed.events[0]!;
    expect('CreatedEvent' in ev && ev.CreatedEvent.observers).toEqual([]);
    expect('CreatedEvent' in ev && ev.CreatedEvent.interfaceViews).toEqual([]);
    expect(Object.hasOwn(ev, 'extra')).toBe(false);
  });

  it('activeContractViews: the same call, each created event kept for its id, template, time and views', async () => {
    const items = [
      {
        workflowId: '',
        contractEntry: { JsActiveContract: { createdEvent, synchronizerId: SYNC, reassignmentCounter: 0 } },
      },
      { contractEntry: { JsIncompleteUnassigned: { createdEvent, unassignedEvent } } },
      { contractEntry: { JsEmpty: {} } },
    ];
    const hits = server.route('POST', '/v2/state/active-contracts', { status: 200, body: items });
    const views = await client().activeContractViews(acsReq, { limit: 100 });
    expect(JSON.parse(hits[0]?.body ?? '')).toEqual(acsReq);
    expect(hits[0]?.query.get('limit')).toBe('100');
    expect(views).toEqual([
      {
        contractEntry: {
          JsActiveContract: {
            createdEvent: {
              contractId: createdEvent.contractId,
              templateId: createdEvent.templateId,
              createdAt: createdEvent.createdAt,
              interfaceViews: createdEvent.interfaceViews.map((v) => ({
                interfaceId: v.interfaceId,
                viewStatus: { code: v.viewStatus.code },
                viewValue: v.viewValue,
              })),
            },
          },
        },
      },
      { contractEntry: {} },
      { contractEntry: {} },
    ]);
    // What the reader uses is checked: each of these answers is refused.
    const active = (ev: Record<string, unknown>) => [
      {
        contractEntry: {
          JsActiveContract: { createdEvent: ev, synchronizerId: SYNC, reassignmentCounter: 0 },
        },
      },
    ];
    const view = createdEvent.interfaceViews[0]!;
    for (const [bad, where] of [
      [active({ ...createdEvent, contractId: 7 }), 'createdEvent.contractId'],
      [active({ ...createdEvent, templateId: undefined }), 'createdEvent.templateId'],
      [active({ ...createdEvent, createdAt: null }), 'createdEvent.createdAt'],
      [active({ ...createdEvent, interfaceViews: {} }), 'createdEvent.interfaceViews'],
      [
        active({ ...createdEvent, interfaceViews: [{ ...view, interfaceId: 1 }] }),
        'interfaceViews.0.interfaceId',
      ],
      [
        active({ ...createdEvent, interfaceViews: [{ ...view, viewStatus: { code: '0' } }] }),
        'viewStatus.code',
      ],
      [
        active({ ...createdEvent, interfaceViews: [{ ...view, viewStatus: null }] }),
        'interfaceViews.0.viewStatus',
      ],
      [[{ contractEntry: { JsActiveContract: 'x' } }], 'contractEntry.JsActiveContract'],
      [{ not: 'a list' }, '(root)'],
    ] as const) {
      server.route('POST', '/v2/state/active-contracts', { status: 200, body: bad });
      const e = (await rejection(client().activeContractViews(acsReq))) as CantonApiError;
      expect(e.code, where).toBe('INVALID_RESPONSE');
      expect(e.message, where).toContain(where);
    }
  });

  it('reads an absent ledger-end offset as 0 (protobuf default)', async () => {
    server.route('GET', '/v2/state/ledger-end', { status: 200, body: {} });
    expect(validateAgainst(spec, 'GetLedgerEndResponse', {})).toEqual([]);
    await expect(client().ledgerEnd()).resolves.toEqual({ offset: 0 });
  });

  it('refuses an unknown hashing scheme: INVALID_RESPONSE, not ambiguous for prepare', async () => {
    const hits = server.route('POST', '/v2/interactive-submission/prepare', {
      status: 200,
      body: { ...prepareRes, hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V9' },
    });
    const err = await rejection(client().prepare(prepareReq));
    expect(err).toBeInstanceOf(CantonApiError);
    const e = err as CantonApiError;
    expect(e.code).toBe('INVALID_RESPONSE');
    expect(e.ambiguous).toBe(false);
    expect(e.message).toContain('hashingSchemeVersion');
    expect(hits).toHaveLength(1);
  });

  it('marks an unreadable 2xx answer to a non-idempotent call as ambiguous', async () => {
    server.route('POST', '/v2/interactive-submission/executeAndWaitForTransaction', {
      status: 200,
      body: { transaction: { ...transaction, events: [{ SomeNewEvent: {} }] } },
    });
    const err = await rejection(client().executeAndWaitForTransaction(executeForTxReq));
    expect(err).toBeInstanceOf(CantonApiError);
    const e = err as CantonApiError;
    expect(e.code).toBe('INVALID_RESPONSE');
    expect(e.status).toBe(200);
    expect(e.ambiguous).toBe(true);
    expect(e.retryable).toBe(false);
    expect(e.cause).toBeInstanceOf(CantonApiError);
    expect((e.cause as CantonApiError).message).toContain('transaction.events.0');

    server.route('POST', '/v2/interactive-submission/executeAndWait', {
      status: 200,
      body: { updateId: UPDATE_ID },
    });
    const e2 = (await rejection(client().executeAndWait(executeAndWaitReq))) as CantonApiError;
    expect(e2.code).toBe('INVALID_RESPONSE');
    expect(e2.ambiguous).toBe(true);
  });

  it('refuses a oneof with two branches or an unknown right kind', async () => {
    server.route('GET', '/v2/users/u/rights', {
      status: 200,
      body: {
        rights: [{ kind: { CanActAs: { value: { party: PARTY } }, CanReadAs: { value: { party: PARTY } } } }],
      },
    });
    const e1 = (await rejection(client().listUserRights('u'))) as CantonApiError;
    expect(e1.code).toBe('INVALID_RESPONSE');
    expect(e1.message).toContain('rights.0.kind');

    server.route('GET', '/v2/users/u/rights', {
      status: 200,
      body: { rights: [{ kind: { CanDoAnything: { value: {} } } }] },
    });
    const e2 = (await rejection(client().listUserRights('u'))) as CantonApiError;
    expect(e2.code).toBe('INVALID_RESPONSE');
  });
});

describe('LedgerApiClient errors and retries', () => {
  const prepareError = {
    code: 'FAILED_TO_PREPARE_TRANSACTION',
    cause: 'Interpretation error: Error: User failure: insufficient funds',
    correlationId: 'corr-1',
    traceId: 'trace-1',
    context: { participant: 'participant1', commandId: 'cmd-1' },
    resources: [],
    errorCategory: 8,
    grpcCodeValue: 3,
    definiteAnswer: false,
  };

  it('surfaces a JsCantonError 400 on prepare as CantonApiError with code and category', async () => {
    expect(validateAgainst(spec, 'JsCantonError', prepareError)).toEqual([]);
    const hits = server.route('POST', '/v2/interactive-submission/prepare', {
      status: 400,
      body: prepareError,
    });
    const err = await rejection(client().prepare(prepareReq));
    expect(err).toBeInstanceOf(CantonApiError);
    const e = err as CantonApiError;
    expect(e.status).toBe(400);
    expect(e.service).toBe('ledger-api');
    expect(e.method).toBe('POST');
    expect(e.path).toBe('/v2/interactive-submission/prepare');
    expect(e.code).toBe('FAILED_TO_PREPARE_TRANSACTION');
    expect(e.category).toBe('InvalidIndependentOfSystemState');
    expect(e.cantonError?.correlationId).toBe('corr-1');
    expect(e.detail).toContain('insufficient funds');
    expect(e.retryable).toBe(false);
    expect(e.ambiguous).toBe(false);
    expect(hits).toHaveLength(1);
  });

  it('surfaces a text/plain 400 (request decoding) with the text as detail', async () => {
    server.route('POST', '/v2/interactive-submission/prepare', {
      status: 400,
      body: 'Invalid value for: body (Missing required field at commandId)',
      contentType: 'text/plain',
    });
    const e = (await rejection(client().prepare(prepareReq))) as CantonApiError;
    expect(e.code).toBe('HTTP_400');
    expect(e.detail).toContain('Missing required field');
  });

  const unavailable = {
    code: 'SERVICE_NOT_RUNNING',
    cause: 'Ledger API server is shutting down',
    context: {},
    errorCategory: 1,
    grpcCodeValue: 14,
  };

  for (const c of cases) {
    const ep = LEDGER_API_ENDPOINTS[c.op];
    const verb = ep.idempotent ? 'is retried' : 'is not retried';
    it(`${c.op} ${verb} on 503`, async () => {
      expect(validateAgainst(spec, 'JsCantonError', unavailable)).toEqual([]);
      const { method, concretePath } = endpointOf(c);
      const hits = server.route(
        method,
        concretePath,
        { status: 503, body: unavailable },
        { status: 200, body: c.canned },
      );
      if (ep.idempotent) {
        await expect(c.call(client())).resolves.toEqual(c.expected ?? c.canned);
        expect(hits).toHaveLength(2);
        // A retry sends the very same request.
        expect(hits[1]?.body).toBe(hits[0]?.body);
      } else {
        const e = (await rejection(c.call(client()))) as CantonApiError;
        expect(e).toBeInstanceOf(CantonApiError);
        expect(e.status).toBe(503);
        expect(e.code).toBe('SERVICE_NOT_RUNNING');
        expect(e.retryable).toBe(true); // the caller may decide to resubmit
        expect(hits).toHaveLength(1);
      }
    });
  }

  it('marks a 504 on execute as ambiguous (the submission may have gone through)', async () => {
    server.route('POST', '/v2/interactive-submission/execute', { status: 504, body: '' });
    const e = (await rejection(client().execute(executeReq))) as CantonApiError;
    expect(e.status).toBe(504);
    expect(e.ambiguous).toBe(true);
  });
});

describe('LedgerApiClient request validation (nothing is sent)', () => {
  const invalid: [string, LedgerApiOperation, (c: LedgerApiClient) => Promise<unknown>, string][] = [
    [
      'signature not base64',
      'execute',
      (c) =>
        c.execute({
          ...executeReq,
          partySignatures: {
            signatures: [{ party: PARTY, signatures: [{ ...ed25519Sig, signature: 'not base64!' }] }],
          },
        }),
      'partySignatures.signatures.0.signatures.0.signature',
    ],
    [
      'signedBy not a fingerprint',
      'execute',
      (c) =>
        c.execute({
          ...executeReq,
          partySignatures: {
            signatures: [{ party: PARTY, signatures: [{ ...ed25519Sig, signedBy: 'abc' }] }],
          },
        }),
      'partySignatures.signatures.0.signatures.0.signedBy',
    ],
    [
      'unspecified hashing scheme',
      'execute',
      (c) =>
        c.execute({
          ...executeReq,
          hashingSchemeVersion: 'HASHING_SCHEME_VERSION_UNSPECIFIED' as 'HASHING_SCHEME_VERSION_V2',
        }),
      'hashingSchemeVersion',
    ],
    [
      'unknown field',
      'prepare',
      (c) => c.prepare({ ...prepareReq, actAsAll: true } as JsPrepareSubmissionRequest),
      '(root)',
    ],
    ['empty actAs', 'prepare', (c) => c.prepare({ ...prepareReq, actAs: [] }), 'actAs'],
    [
      'command with two branches',
      'prepare',
      (c) =>
        c.prepare({
          ...prepareReq,
          commands: [
            {
              CreateCommand: { templateId: AMULET, createArguments: {} },
              ExerciseCommand: { templateId: AMULET, contractId: CID, choice: 'X', choiceArgument: {} },
            } as unknown as JsPrepareSubmissionRequest['commands'][number],
          ],
        }),
      'commands.0',
    ],
    [
      'missing Daml value',
      'prepare',
      (c) =>
        c.prepare({
          ...prepareReq,
          commands: [
            {
              ExerciseCommand: { templateId: AMULET, contractId: CID, choice: 'X' },
            } as unknown as JsPrepareSubmissionRequest['commands'][number],
          ],
        }),
      'commands.0.ExerciseCommand.choiceArgument',
    ],
    [
      'maxRecordTime not an instant',
      'prepare',
      (c) => c.prepare({ ...prepareReq, maxRecordTime: 'tomorrow' }),
      'maxRecordTime',
    ],
    ['empty user id', 'grantUserRights', (c) => c.grantUserRights('', grantRights), 'userId'],
    ['no rights', 'revokeUserRights', (c) => c.revokeUserRights(USER, []), 'rights'],
    ['empty parties', 'completions', (c) => c.completions({ parties: [] }), 'parties'],
  ];

  for (const [name, op, call, field] of invalid) {
    it(`${op}: ${name}`, async () => {
      const ep = LEDGER_API_ENDPOINTS[op];
      const hits = server.route(ep.method, ep.path.replace('{user-id}', USER), { status: 200, body: {} });
      const err = await rejection(call(client()));
      expect(err).toBeInstanceOf(LedgerApiRequestError);
      expect(err).toBeInstanceOf(TypeError);
      expect((err as LedgerApiRequestError).field).toBe(field);
      expect((err as Error).message).toContain(`ledger-api ${op}: invalid request at ${field}`);
      expect(hits).toHaveLength(0);
    });
  }

  it('refuses a negative list limit before sending', async () => {
    const hits = server.route('POST', '/v2/commands/completions', { status: 200, body: [] });
    await expect(client().completions(completionsReq, { limit: -1 })).rejects.toThrow(TypeError);
    expect(hits).toHaveLength(0);
  });
});
