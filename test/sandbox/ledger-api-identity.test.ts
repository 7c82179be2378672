/**
 * The sandbox participant's version, users, parties, pruning offsets, contract
 * events and the request forms a participant accepts, over HTTP against one
 * sandbox: `GET /v2/version`; user management (list with paging, create with
 * rights, get, update, delete); parties (list with paging and a filter,
 * details of known and unknown parties, local allocation); the legacy
 * active-contracts request form; events by contract id; interface views in the
 * ledger-effects shape; requests without a Content-Type, with `text/plain`, and
 * with doubled slashes. Every answer is checked against both published Ledger
 * API documents (3.4.12 and 3.5.1), and the refusals are Canton's.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEDGER_API_USER, VALIDATOR_USER } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { loadSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';

const specs = ['3.4.12', '3.5.1'].map((v) =>
  loadSpec(join(SPECS_DIR, `canton-ledger-api/openapi-${v}.yaml`)),
);
const ADMIN = 'identity-admin-token';
const PLAIN = 'identity-plain-token';
let sb: RunningSandbox;

interface Answer {
  status: number;
  body: unknown;
}

async function call(
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; contentType?: string | null } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${opts.token ?? ADMIN}` };
  if (opts.body !== undefined && opts.contentType !== null)
    headers['content-type'] = opts.contentType ?? 'application/json';
  const res = await fetch(`${sb.urls.origin}${path}`, {
    method,
    headers,
    ...(opts.body === undefined
      ? {}
      : { body: typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body) }),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, body };
}

/** A 200 valid against `component` in both spec versions. */
function ok<T = Record<string, unknown>>(a: Answer, component: string): T {
  expect(a.status, JSON.stringify(a.body)).toBe(200);
  for (const spec of specs) expect(validateAgainst(spec, component, a.body)).toEqual([]);
  return a.body as T;
}

/** A Canton error with `status` and error id `code`, valid as JsCantonError. */
function refused(a: Answer, status: number, code: string): string {
  expect(a.status, JSON.stringify(a.body)).toBe(status);
  for (const spec of specs) expect(validateAgainst(spec, 'JsCantonError', a.body)).toEqual([]);
  const body = a.body as { code: string; cause: string };
  expect(body.code).toBe(code);
  return body.cause;
}

beforeAll(async () => {
  sb = await startSandbox({
    seed: 'ledger-api-identity',
    timers: false,
    auth: { required: true, tokens: { [ADMIN]: VALIDATOR_USER, [PLAIN]: LEDGER_API_USER } },
  });
});
afterAll(async () => {
  await sb?.close();
});

describe('version and pruning', () => {
  it('GET /v2/version names the version and the limits, also at a doubled slash', async () => {
    const v = ok<{ version: string; features: { userManagement: { maxUsersPageSize: number } } }>(
      await call('GET', '//v2/version'),
      'GetLedgerApiVersionResponse',
    );
    expect(v.version).toMatch(/^3\.4\./);
    expect(v.features.userManagement.maxUsersPageSize).toBe(1000);
  });

  it('nothing is pruned', async () => {
    expect(
      ok(await call('GET', '/v2/state/latest-pruned-offsets'), 'GetLatestPrunedOffsetsResponse'),
    ).toEqual({ participantPrunedUpToInclusive: 0, allDivulgedContractsPrunedUpToInclusive: 0 });
  });
});

describe('users', () => {
  it('creates a user with rights (no Content-Type), gets, pages, updates and deletes it', async () => {
    const party = sb.ctx.net.validatorParty;
    const created = ok<{ user: { id: string } }>(
      await call('POST', '/v2/users', {
        contentType: null,
        body: {
          user: { id: 'alice-user', primaryParty: party, isDeactivated: false, identityProviderId: '' },
          rights: [{ kind: { CanReadAs: { value: { party } } } }],
        },
      }),
      'CreateUserResponse',
    );
    expect(created.user.id).toBe('alice-user');
    const rights = await call('GET', '/v2/users/alice-user/rights');
    expect(JSON.stringify(rights.body)).toContain(party);
    const got = ok<{ user: { primaryParty: string } }>(
      await call('GET', '/v2/users/alice-user'),
      'GetUserResponse',
    );
    expect(got.user.primaryParty).toBe(party);

    // Pages of one, in id order, until the token runs out.
    const seen: string[] = [];
    let token = '';
    for (let i = 0; i < 10; i++) {
      const page = ok<{ users: { id: string }[]; nextPageToken: string }>(
        await call('GET', `/v2/users?pageSize=1&pageToken=${token}`),
        'ListUsersResponse',
      );
      seen.push(...page.users.map((u) => u.id));
      token = page.nextPageToken;
      if (token === '') break;
    }
    expect(seen).toEqual([...sb.ctx.net.users.keys()].sort());

    const updated = ok<{ user: { primaryParty?: string } }>(
      await call('PATCH', '/v2/users/alice-user', {
        body: { user: { id: 'alice-user', primaryParty: '' }, updateMask: { paths: ['primary_party'] } },
      }),
      'UpdateUserResponse',
    );
    expect(updated.user.primaryParty).toBeUndefined();
    expect(await call('DELETE', '/v2/users/alice-user')).toEqual({ status: 200, body: {} });
    refused(await call('GET', '/v2/users/alice-user'), 404, 'USER_NOT_FOUND');
  });

  it('refuses what Canton refuses', async () => {
    refused(
      await call('POST', '/v2/users', { body: { user: { id: VALIDATOR_USER } } }),
      409,
      'USER_ALREADY_EXISTS',
    );
    refused(await call('GET', '/v2/users', { token: PLAIN }), 403, 'PERMISSION_DENIED');
    refused(await call('GET', `/v2/users/${VALIDATOR_USER}`, { token: PLAIN }), 403, 'PERMISSION_DENIED');
    // A user may read itself.
    ok(await call('GET', `/v2/users/${LEDGER_API_USER}`, { token: PLAIN }), 'GetUserResponse');
    expect(
      refused(
        await call('POST', '/v2/users', {
          body: {
            user: { id: 'bob-user' },
            rights: [{ kind: { CanActAs: { value: { party: 'nobody::1220ab' } } } }],
          },
        }),
        400,
        'INVALID_ARGUMENT',
      ),
    ).toMatch(/not known/);
    // The refused right left no half-created user behind.
    refused(await call('GET', '/v2/users/bob-user'), 404, 'USER_NOT_FOUND');
    // A grant with one unknown party grants nothing, not even the rights listed before it.
    ok(await call('POST', '/v2/users', { body: { user: { id: 'carol-user' } } }), 'CreateUserResponse');
    const validatorParty = (
      (await (await fetch(`${sb.urls.origin}/sandbox/info`)).json()) as {
        validatorParty: string;
      }
    ).validatorParty;
    expect(
      refused(
        await call('POST', '/v2/users/carol-user/rights', {
          body: {
            userId: 'carol-user',
            rights: [
              { kind: { CanActAs: { value: { party: validatorParty } } } },
              { kind: { ParticipantAdmin: { value: {} } } },
              { kind: { CanReadAs: { value: { party: 'nobody::1220ab' } } } },
            ],
          },
        }),
        400,
        'INVALID_ARGUMENT',
      ),
    ).toMatch(/not known/);
    expect(ok(await call('GET', '/v2/users/carol-user/rights'), 'ListUserRightsResponse')).toEqual({
      rights: [],
    });
    expect(
      refused(
        await call('PATCH', `/v2/users/${LEDGER_API_USER}`, {
          body: { user: { id: LEDGER_API_USER }, updateMask: { paths: ['identity_provider_id'] } },
        }),
        400,
        'INVALID_ARGUMENT',
      ),
    ).toMatch(/not updatable/);
  });
});

describe('parties', () => {
  it('allocates a local party (text/plain JSON body), lists it and shows its details', async () => {
    const a = ok<{ partyDetails: { party: string; isLocal: boolean } }>(
      await call('POST', '/v2/parties', {
        contentType: 'text/plain',
        body: { partyIdHint: 'carol', userId: LEDGER_API_USER },
      }),
      'AllocatePartyResponse',
    );
    expect(a.partyDetails.party).toMatch(/^carol::1220[0-9a-f]{64}$/);
    expect(sb.ctx.net.users.get(LEDGER_API_USER)!.actAs.has(a.partyDetails.party)).toBe(true);
    refused(
      await call('POST', '/v2/parties', { body: { partyIdHint: 'carol' } }),
      409,
      'PARTY_ALREADY_EXISTS',
    );
    refused(
      await call('POST', '/v2/parties', { token: PLAIN, body: { partyIdHint: 'dave' } }),
      403,
      'PERMISSION_DENIED',
    );

    const listed = ok<{ partyDetails: { party: string }[] }>(
      await call('GET', '/v2/parties?filter-party=carol'),
      'ListKnownPartiesResponse',
    );
    expect(listed.partyDetails.map((p) => p.party)).toEqual([a.partyDetails.party]);
    const all = [...sb.ctx.net.localParties, ...sb.ctx.net.parties.keys()].sort();
    const first = ok<{ partyDetails: { party: string }[]; nextPageToken: string }>(
      await call('GET', '/v2/parties?pageSize=2'),
      'ListKnownPartiesResponse',
    );
    expect(first.partyDetails.map((p) => p.party)).toEqual(all.slice(0, 2));
    const second = ok<{ partyDetails: { party: string }[] }>(
      await call('GET', `/v2/parties?pageSize=2&pageToken=${first.nextPageToken}`),
      'ListKnownPartiesResponse',
    );
    expect(second.partyDetails.map((p) => p.party)).toEqual(all.slice(2, 4));

    // The path's party and the query's; an unknown one is left out.
    const unknown = `nobody::1220${'ab'.repeat(32)}`;
    const details = ok<{ partyDetails: { party: string }[] }>(
      await call(
        'GET',
        `/v2/parties/${encodeURIComponent(a.partyDetails.party)}?parties=${encodeURIComponent(sb.ctx.net.dso)}&parties=${encodeURIComponent(unknown)}`,
      ),
      'GetPartiesResponse',
    );
    expect(details.partyDetails.map((p) => p.party)).toEqual([a.partyDetails.party, sb.ctx.net.dso]);
    // Party lookups need participant admin or CanReadAsAnyParty, also for a party the user acts as.
    const lookup = () =>
      call('GET', `/v2/parties/${encodeURIComponent(a.partyDetails.party)}`, { token: PLAIN });
    refused(await lookup(), 403, 'PERMISSION_DENIED');
    refused(await call('GET', '/v2/parties', { token: PLAIN }), 403, 'PERMISSION_DENIED');
    const anyParty = { userId: LEDGER_API_USER, rights: [{ kind: { CanReadAsAnyParty: { value: {} } } }] };
    ok(
      await call('POST', `/v2/users/${LEDGER_API_USER}/rights`, { body: anyParty }),
      'GrantUserRightsResponse',
    );
    ok(await lookup(), 'GetPartiesResponse');
    // It also reads as every party: a wildcard filter on the ACS.
    const acs = await call('POST', '/v2/state/active-contracts', {
      token: PLAIN,
      body: { eventFormat: { filtersForAnyParty: {} }, activeAtOffset: sb.ctx.net.store.ledgerEnd() },
    });
    expect(acs.status).toBe(200);
    ok(
      await call('PATCH', `/v2/users/${LEDGER_API_USER}/rights`, { body: anyParty }),
      'RevokeUserRightsResponse',
    );
    refused(await lookup(), 403, 'PERMISSION_DENIED');
    // participant-id is its own route, not a party.
    expect((await call('GET', '/v2/parties/participant-id')).body).toEqual({
      participantId: sb.ctx.net.participantId,
    });
  });
});

describe('contracts', () => {
  it('every read route refuses a party the user has no right for, and the any-party filter to a non-admin', async () => {
    const dso = sb.ctx.net.dso;
    const ledgerEnd = (
      ok(await call('GET', '/v2/state/ledger-end'), 'GetLedgerEndResponse') as {
        offset: number;
      }
    ).offset;
    const byParty = { filtersByParty: { [dso]: {} } };
    const anyParty = { filtersForAnyParty: {} };
    for (const eventFormat of [byParty, anyParty]) {
      const updateFormat = {
        includeTransactions: { eventFormat, transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA' },
      };
      const reads: [string, string, unknown][] = [
        ['POST', '/v2/updates', { beginExclusive: 0, endInclusive: ledgerEnd, updateFormat }],
        ['POST', '/v2/updates/flats', { beginExclusive: 0, endInclusive: ledgerEnd, filter: eventFormat }],
        ['POST', '/v2/updates/trees', { beginExclusive: 0, endInclusive: ledgerEnd, filter: eventFormat }],
        ['POST', '/v2/updates/update-by-offset', { offset: 1, updateFormat }],
        ['POST', '/v2/updates/update-by-id', { updateId: 'x', updateFormat }],
        [
          'POST',
          '/v2/updates/transaction-by-id',
          { updateId: 'x', transactionFormat: updateFormat.includeTransactions },
        ],
        ['POST', '/v2/events/events-by-contract-id', { contractId: '00ab', eventFormat }],
        ['POST', '/v2/state/active-contracts', { activeAtOffset: ledgerEnd, eventFormat }],
      ];
      for (const [method, path, body] of reads)
        expect(
          refused(await call(method, path, { token: PLAIN, body }), 403, 'PERMISSION_DENIED'),
          path,
        ).toMatch(/may not read as/);
    }
    expect(
      refused(
        await call('GET', `/v2/updates/transaction-tree-by-offset/1?parties=${encodeURIComponent(dso)}`, {
          token: PLAIN,
        }),
        403,
        'PERMISSION_DENIED',
      ),
    ).toMatch(/may not read as/);
  });

  it('reads the ACS in the legacy {filter, verbose} form, and refuses a request naming no party', async () => {
    const party = sb.ctx.net.validatorParty;
    const offset = sb.ctx.net.store.ledgerEnd();
    const legacy = await call('POST', '/v2/state/active-contracts', {
      contentType: null,
      body: { filter: { filtersByParty: { [party]: {} } }, verbose: true, activeAtOffset: offset },
    });
    const current = await call('POST', '/v2/state/active-contracts', {
      body: { eventFormat: { filtersByParty: { [party]: {} }, verbose: true }, activeAtOffset: offset },
    });
    expect(legacy.status).toBe(200);
    expect((legacy.body as unknown[]).length).toBeGreaterThan(0);
    expect(legacy.body).toEqual(current.body);
    for (const item of legacy.body as unknown[])
      for (const spec of specs)
        expect(validateAgainst(spec, 'JsGetActiveContractsResponse', item)).toEqual([]);
    expect(
      refused(
        await call('POST', '/v2/state/active-contracts', { body: { activeAtOffset: offset } }),
        400,
        'INVALID_ARGUMENT',
      ),
    ).toMatch(/eventFormat is required/);
  });

  it('answers events by contract id: the create, then the archive; unknown ids are not found', async () => {
    const party = sb.ctx.net.validatorParty;
    const amulet = sb.ctx.net.store.activeContracts('Amulet').find((c) => c.stakeholders.includes(party))!;
    const format = {
      filtersByParty: {
        [party]: {
          cumulative: [
            {
              identifierFilter: {
                InterfaceFilter: {
                  value: {
                    interfaceId: '#splice-api-token-holding-v1:Splice.Api.Token.HoldingV1:Holding',
                    includeInterfaceView: true,
                    includeCreatedEventBlob: false,
                  },
                },
              },
            },
          ],
        },
      },
      verbose: true,
    };
    const r = ok<{ created: { createdEvent: { interfaceViews: unknown[] } }; archived?: unknown }>(
      await call('POST', '/v2/events/events-by-contract-id', {
        body: { contractId: amulet.contractId, eventFormat: format },
      }),
      'JsGetEventsByContractIdResponse',
    );
    expect(r.created.createdEvent.interfaceViews).toHaveLength(1);
    expect(r.archived).toBeUndefined();
    refused(
      await call('POST', '/v2/events/events-by-contract-id', {
        body: { contractId: `00${'cd'.repeat(32)}`, eventFormat: format },
      }),
      404,
      'CONTRACT_EVENTS_NOT_FOUND',
    );
    // The archive half: a mining round, which the rounds' automation archives.
    const round = sb.ctx.net.store.activeContracts('OpenMiningRound')[0]!;
    await fetch(`${sb.urls.origin}/sandbox/advance-round`, { method: 'POST' });
    await fetch(`${sb.urls.origin}/sandbox/advance-round`, { method: 'POST' });
    expect(sb.ctx.net.store.isArchived(round.contractId)).toBe(true);
    const gone = ok<{ archived: { archivedEvent: { contractId: string } } }>(
      await call('POST', '/v2/events/events-by-contract-id', {
        body: { contractId: round.contractId, eventFormat: { filtersForAnyParty: {} } },
      }),
      'JsGetEventsByContractIdResponse',
    );
    expect(gone.archived.archivedEvent.contractId).toBe(round.contractId);
  });

  it('a body that is not JSON, or JSON with a __proto__ key, is the JSON API 400', async () => {
    for (const body of ['not json', '{"__proto__": {"admin": true}, "activeAtOffset": 0}']) {
      const r = await call('POST', '/v2/state/active-contracts', { contentType: null, body });
      expect(r.status).toBe(400);
      expect(String(r.body)).toMatch(/not JSON/);
    }
  });
});
