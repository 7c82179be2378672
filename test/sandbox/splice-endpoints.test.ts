/**
 * The Splice endpoints the Canton Wallet SDK reads besides the admin API, against one
 * sandbox that requires tokens: the public validator-user info, the token-metadata API
 * (through the scan proxy and on Scan's root), AmuletRules (proxy GET, Scan POST with
 * caching), ExternalPartyAmuletRules, featured app rights, and Scan's member traffic
 * status. Every answer is checked against the published OpenAPI documents, and the
 * values follow the ledger: a tap grows the total supply, a grant shows as featured, a
 * traffic purchase and later submissions move the traffic numbers.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addAmounts } from '../../src/sandbox/amulet.js';
import { isoMicros } from '../../src/sandbox/ledger/clock.js';
import type { SandboxNetwork } from '../../src/sandbox/network.js';
import { featuredAppRightContract } from '../../src/sandbox/scan/featured.js';
import { memberTrafficContract, TRAFFIC_PER_TRANSACTION } from '../../src/sandbox/scan/traffic.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { loadSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';

const spec = (name: string) => loadSpec(join(SPECS_DIR, `splice-0.6.1/${name}.yaml`));
const metadataSpec = spec('token-metadata-v1');
const scanSpec = spec('scan');
const proxySpec = spec('scan-proxy');
const validatorSpec = spec('validator-internal');

const TOKEN = 'splice-endpoints-token';
let sb: RunningSandbox;
let net: SandboxNetwork;

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

async function call(method: 'GET' | 'POST', path: string, opts: { token?: string; body?: unknown } = {}) {
  const headers: Record<string, string> = {};
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${sb.urls.origin}${path}`, {
    method,
    headers,
    ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> } as Answer;
}
const get = (path: string, token?: string) => call('GET', path, token === undefined ? {} : { token });

/** A 200 whose body is valid against `component` of `specDoc`. */
function ok(a: Answer, specDoc: ReturnType<typeof spec>, component: string): Record<string, unknown> {
  expect(a.status, JSON.stringify(a.body)).toBe(200);
  expect(validateAgainst(specDoc, component, a.body)).toEqual([]);
  return a.body;
}

/** A Splice `{error}` answer with `status`, its message matching `pattern`. */
function refused(a: Answer, status: number, pattern: RegExp, specDoc = scanSpec): void {
  expect(a.status).toBe(status);
  expect(validateAgainst(specDoc, 'ErrorResponse', a.body)).toEqual([]);
  expect(String(a.body.error)).toMatch(pattern);
}

beforeAll(async () => {
  sb = await startSandbox({
    seed: 'splice-endpoints',
    timers: false,
    auth: { required: true, tokens: { [TOKEN]: 'sandbox-user' } },
  });
  net = sb.ctx.net;
});

afterAll(async () => {
  await sb?.close();
});

describe('validator-user', () => {
  it('is public and names the operator; featured follows a FeaturedAppRight', async () => {
    const before = ok(
      await get('/api/validator/v0/validator-user'),
      validatorSpec,
      'GetValidatorUserInfoResponse',
    );
    expect(before).toEqual({
      party_id: net.validatorParty,
      user_name: 'validator-operator',
      featured: false,
    });
    // `security: []`: not even a bad token is looked at.
    expect((await get('/api/validator/v0/validator-user', 'not-a-token')).status).toBe(200);

    net.commitInternal({
      archives: [],
      creates: [featuredAppRightContract(net.dso, net.validatorParty)],
      commandId: 'test-feature-validator',
    });
    const after = ok(
      await get('/api/validator/v0/validator-user'),
      validatorSpec,
      'GetValidatorUserInfoResponse',
    );
    expect(after.featured).toBe(true);
  });
});

describe('token metadata', () => {
  const roots = [
    { name: 'scan proxy', root: '/api/validator/v0/scan-proxy/registry', token: TOKEN },
    { name: 'Scan', root: '/registry', token: undefined },
  ];

  it('the scan proxy wants a token, Scan does not', async () => {
    const a = await get('/api/validator/v0/scan-proxy/registry/metadata/v1/info');
    expect(a.status).toBe(401);
    expect((await get('/registry/metadata/v1/info')).status).toBe(200);
  });

  for (const { name, root, token } of roots) {
    it(`${name}: info names the DSO as admin`, async () => {
      const info = ok(await get(`${root}/metadata/v1/info`, token), metadataSpec, 'GetRegistryInfoResponse');
      expect(info).toEqual({ adminId: net.dso, supportedApis: { 'splice-api-token-metadata-v1': 1 } });
    });

    it(`${name}: the Amulet instrument's total supply follows the holdings`, async () => {
      const first = ok(
        await get(`${root}/metadata/v1/instruments/Amulet`, token),
        metadataSpec,
        'Instrument',
      );
      expect(first).toMatchObject({ id: 'Amulet', name: 'Canton Coin', symbol: 'CC', decimals: 10 });
      expect(first.supportedApis).toMatchObject({
        'splice-api-token-holding-v1': 1,
        'splice-api-token-transfer-instruction-v1': 1,
      });

      const tap = await call('POST', '/sandbox/tap', {
        body: { party: net.validatorParty, amount: '250.5' },
      });
      expect(tap.status).toBe(200);
      const after = ok(
        await get(`${root}/metadata/v1/instruments/Amulet`, token),
        metadataSpec,
        'Instrument',
      );
      expect(after.totalSupply).toBe(addAmounts(String(first.totalSupply), '250.5'));
      const tapped = net.store.updates().at(-1)!;
      expect(after.totalSupplyAsOf).toBe(isoMicros(tapped.recordTime));

      const list = ok(
        await get(`${root}/metadata/v1/instruments`, token),
        metadataSpec,
        'ListInstrumentsResponse',
      );
      expect(list).toEqual({ instruments: [after] });
    });

    it(`${name}: paging, an unknown instrument, a bad page size`, async () => {
      const page = ok(
        await get(`${root}/metadata/v1/instruments?pageSize=1&pageToken=Amulet`, token),
        metadataSpec,
        'ListInstrumentsResponse',
      );
      expect(page).toEqual({ instruments: [] });
      refused(
        await get(`${root}/metadata/v1/instruments/Bitcoin`, token),
        404,
        /No instrument with id Bitcoin/,
        metadataSpec,
      );
      refused(await get(`${root}/metadata/v1/instruments?pageSize=0`, token), 400, /pageSize/, metadataSpec);
    });
  }

  it('Scan serves the transfer factory at its root too', async () => {
    const body = {
      choiceArguments: {
        expectedAdmin: net.dso,
        transfer: {
          sender: net.dso,
          receiver: net.validatorParty,
          instrumentId: { admin: net.dso, id: 'Amulet' },
        },
      },
      excludeDebugFields: true,
    };
    const a = await call('POST', '/registry/transfer-instruction/v1/transfer-factory', { body });
    const r = ok(a, spec('transfer-instruction-v1'), 'TransferFactoryWithChoiceContext');
    expect(r.factoryId).toBe(net.externalPartyAmuletRules().contractId);
  });
});

describe('AmuletRules', () => {
  it('the scan proxy answers the current contract', async () => {
    const r = ok(
      await get('/api/validator/v0/scan-proxy/amulet-rules', TOKEN),
      proxySpec,
      'GetAmuletRulesProxyResponse',
    );
    const rules = r.amulet_rules as {
      contract: { contract_id: string; payload: { isDevNet: boolean } };
      domain_id: string;
    };
    expect(rules.contract.contract_id).toBe(net.amuletRules().contractId);
    expect(rules.contract.payload.isDevNet).toBe(true);
    expect(rules.domain_id).toBe(net.synchronizerId);
    expect((await get('/api/validator/v0/scan-proxy/amulet-rules')).status).toBe(401);
  });

  it('Scan answers it, or only its synchronizer when the caller holds it', async () => {
    const full = ok(
      await call('POST', '/api/scan/v0/amulet-rules', { body: {} }),
      scanSpec,
      'GetAmuletRulesResponse',
    );
    const update = full.amulet_rules_update as { contract: { contract_id: string } };
    expect(update.contract.contract_id).toBe(net.amuletRules().contractId);

    const cached = await call('POST', '/api/scan/v0/amulet-rules', {
      body: {
        cached_amulet_rules_contract_id: net.amuletRules().contractId,
        cached_amulet_rules_domain_id: net.synchronizerId,
      },
    });
    expect(ok(cached, scanSpec, 'GetAmuletRulesResponse')).toEqual({
      amulet_rules_update: { domain_id: net.synchronizerId },
    });

    const stale = await call('POST', '/api/scan/v0/amulet-rules', {
      body: { cached_amulet_rules_contract_id: '00stale', cached_amulet_rules_domain_id: net.synchronizerId },
    });
    expect(
      (ok(stale, scanSpec, 'GetAmuletRulesResponse').amulet_rules_update as { contract?: unknown }).contract,
    ).toBeDefined();
    refused(await call('POST', '/api/scan/v0/amulet-rules', { body: [] }), 400, /JSON object/);
  });

  it('Scan answers ExternalPartyAmuletRules the same way', async () => {
    const r = ok(
      await call('POST', '/api/scan/v0/external-party-amulet-rules', { body: {} }),
      scanSpec,
      'GetExternalPartyAmuletRulesResponse',
    );
    const update = r.external_party_amulet_rules_update as { contract: { contract_id: string } };
    expect(update.contract.contract_id).toBe(net.externalPartyAmuletRules().contractId);
  });
});

describe('featured app rights', () => {
  const provider = 'featured-provider::1220feed';

  it('absent until the DSO grants one, on Scan and the scan proxy', async () => {
    const paths = [
      { path: `/api/scan/v0/featured-apps/${provider}`, token: undefined, doc: scanSpec },
      { path: `/api/validator/v0/scan-proxy/featured-apps/${provider}`, token: TOKEN, doc: proxySpec },
    ];
    for (const p of paths)
      expect(ok(await get(p.path, p.token), p.doc, 'LookupFeaturedAppRightResponse')).toEqual({});

    const granted = net.commitInternal({
      archives: [],
      creates: [featuredAppRightContract(net.dso, provider)],
      commandId: 'test-feature-provider',
    }).events[0]!.contract;
    for (const p of paths) {
      const r = ok(await get(p.path, p.token), p.doc, 'LookupFeaturedAppRightResponse');
      const right = r.featured_app_right as { contract_id: string; payload: Record<string, unknown> };
      expect(right.contract_id).toBe(granted.contractId);
      expect(right.payload).toEqual({ dso: net.dso, provider });
    }
  });
});

describe('member traffic status', () => {
  const path = (domain: string, member: string) =>
    `/api/scan/v0/domains/${encodeURIComponent(domain)}/members/${encodeURIComponent(member)}/traffic-status`;

  it('follows the purchases on the ledger and the transactions submitted since', async () => {
    const member = `PAR::${net.participantId}`;
    const status = async () =>
      ok(await get(path(net.synchronizerId, member)), scanSpec, 'GetMemberTrafficStatusResponse')
        .traffic_status;
    expect(await status()).toEqual({
      actual: { total_consumed: 0, total_limit: 0 },
      target: { total_purchased: 0 },
    });

    net.commitInternal({
      archives: [],
      creates: [memberTrafficContract(net, member, 1_000_000, '200')],
      commandId: 'test-buy-traffic',
    });
    expect(await status()).toEqual({
      actual: { total_consumed: 0, total_limit: 1_000_000 },
      target: { total_purchased: 1_000_000 },
    });

    // A transaction submitted through the Ledger API after the purchase is charged.
    const now = net.clock.now();
    net.store.commit({
      commandId: 'test-submitted',
      userId: 'sandbox-user',
      actAs: [net.validatorParty],
      recordTime: now,
      effectiveAt: now,
      synchronizerId: net.synchronizerId,
      archives: [],
      creates: [],
    });
    expect(await status()).toEqual({
      actual: { total_consumed: TRAFFIC_PER_TRANSACTION, total_limit: 1_000_000 },
      target: { total_purchased: 1_000_000 },
    });
  });

  it('refuses ids that do not decode (400), another synchronizer or member (404)', async () => {
    const member = `PAR::${net.participantId}`;
    refused(await get(path(net.synchronizerId, net.participantId)), 400, /Could not decode member ID/);
    refused(await get(path('global-domain', member)), 400, /Could not decode domain ID/);
    refused(await get(path('other-domain::1220ab', member)), 404, /not known/);
    refused(await get(path(net.synchronizerId, 'PAR::other-participant::1220ab')), 404, /No traffic state/);
    // The scan proxy has no traffic endpoint (the SDK asks Scan).
    expect((await get(`/api/validator/v0/scan-proxy/domains/x/members/y/traffic-status`, TOKEN)).status).toBe(
      404,
    );
  });
});
