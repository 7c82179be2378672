/**
 * The token-standard registry for Canton Coin, served through the validator's scan
 * proxy (`/api/validator/v0/scan-proxy/registry/...`, authenticated like the proxy) and
 * by Scan itself at its root (`/registry/...`, public): the metadata API
 * (`./metadata.ts`), the transfer factory with its choice context, and the choice
 * contexts of a transfer instruction's accept / reject / withdraw. The context keys and
 * disclosed contracts are the ones the real registry hands out (the real vectors'
 * `extraArgs.context`) and the ones the participant's interpreter
 * (`../participant/interpret.ts`) reads back.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Value } from '../../hashing/model.js';
import type { SandboxContext } from '../context.js';
import { spliceError } from '../errors.js';
import { isoMicros } from '../ledger/clock.js';
import type { Contract } from '../ledger/store.js';
import { identifierString, str, valueToJson } from '../ledger/value-json.js';
import type { SandboxNetwork } from '../network.js';
import { featuredAppRightOf } from '../scan/featured.js';
import { instrumentById, listInstruments, registryInfo } from './metadata.js';
import { preapprovalOf } from './routes.js';

/** Where the registry is served, and whether without authentication. */
const REGISTRY_ROOTS = [
  { root: '/api/validator/v0/scan-proxy/registry', public: false },
  { root: '/registry', public: true },
] as const;

type AnyValueJson = { tag: 'AV_ContractId'; value: string } | { tag: 'AV_Bool'; value: boolean };

const avCid = (c: Contract): AnyValueJson => ({ tag: 'AV_ContractId', value: c.contractId });

/** A registry `DisclosedContract`; the `debug*` fields unless excluded. */
function disclosed(net: SandboxNetwork, c: Contract, excludeDebug: boolean) {
  const d: Record<string, unknown> = {
    templateId: identifierString(c.templateId),
    contractId: c.contractId,
    createdEventBlob: c.createdEventBlob,
    synchronizerId: net.synchronizerId,
  };
  if (!excludeDebug) {
    d.debugPackageName = c.packageName;
    d.debugPayload = valueToJson(c.argument as Value);
    d.debugCreatedAt = isoMicros(c.createdAt);
  }
  return d;
}

/** `ChoiceContext` from named contracts (`AV_ContractId` values, disclosed) and extra values. */
function choiceContext(
  net: SandboxNetwork,
  contracts: Record<string, Contract>,
  extra: Record<string, AnyValueJson>,
  excludeDebug: boolean,
) {
  const values: Record<string, AnyValueJson> = { ...extra };
  for (const [k, c] of Object.entries(contracts)) values[k] = avCid(c);
  const seen = new Set<string>();
  const list = Object.values(contracts).filter((c) => !seen.has(c.contractId) && seen.add(c.contractId));
  return {
    choiceContextData: { values },
    disclosedContracts: list.map((c) => disclosed(net, c, excludeDebug)),
  };
}

const FactoryRequestSchema = z.object({
  choiceArguments: z.object({
    expectedAdmin: z.string().min(1),
    transfer: z.object({
      sender: z.string().min(1),
      receiver: z.string().min(1),
      instrumentId: z.object({ admin: z.string(), id: z.string() }),
    }),
  }),
  excludeDebugFields: z.boolean().optional(),
});

const ContextRequestSchema = z
  .object({ meta: z.record(z.string(), z.string()).optional(), excludeDebugFields: z.boolean().optional() })
  .optional();

function decode<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  throw spliceError(
    400,
    `Invalid request: ${issue.message} at ${issue.path.map(String).join('.') || '(root)'}`,
  );
}

export function registerRegistryRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  for (const { root, public: open } of REGISTRY_ROOTS) registerAt(app, ctx, root, open);
}

function registerAt(app: FastifyInstance, ctx: SandboxContext, root: string, open: boolean): void {
  const { net } = ctx;
  const config = (operation: string) => ({
    config: { service: 'registry', operation: `registry.${operation}`, public: open },
  });
  const BASE = `${root}/transfer-instruction/v1`;
  const METADATA = `${root}/metadata/v1`;

  app.get(`${METADATA}/info`, config('getRegistryInfo'), async () => registryInfo(net));

  app.get(`${METADATA}/instruments`, config('listInstruments'), async (req) => {
    const q = req.query as Record<string, string | undefined>;
    return listInstruments(net, { pageSize: q.pageSize, pageToken: q.pageToken });
  });

  app.get(`${METADATA}/instruments/:instrumentId`, config('getInstrument'), async (req) =>
    instrumentById(net, (req.params as { instrumentId: string }).instrumentId),
  );

  app.post(`${BASE}/transfer-factory`, config('getTransferFactory'), async (req) => {
    const body = decode(FactoryRequestSchema, req.body);
    const { expectedAdmin, transfer } = body.choiceArguments;
    if (expectedAdmin !== net.dso)
      throw spliceError(400, `expectedAdmin ${expectedAdmin} is not this registry's admin ${net.dso}`);
    if (transfer.instrumentId.admin !== net.dso || transfer.instrumentId.id !== 'Amulet')
      throw spliceError(
        404,
        `Instrument ${transfer.instrumentId.admin}:${transfer.instrumentId.id} is not registered here`,
      );
    const factory = net.externalPartyAmuletRules();
    const contracts: Record<string, Contract> = {
      'amulet-rules': net.amuletRules(),
      'open-round': net.latestRound().contract,
    };
    let transferKind: 'self' | 'direct' | 'offer' = 'offer';
    if (transfer.sender === transfer.receiver) transferKind = 'self';
    else {
      const pre = preapprovalOf(net, transfer.receiver);
      if (pre) {
        transferKind = 'direct';
        contracts['transfer-preapproval'] = pre;
        const right = featuredAppRightOf(net, str(pre.argument, 'provider') ?? '');
        if (right) contracts['featured-app-right'] = right;
      }
    }
    const excludeDebug = body.excludeDebugFields ?? false;
    const context = choiceContext(net, contracts, {}, excludeDebug);
    // The factory itself is disclosed too: the sender is no stakeholder of it.
    context.disclosedContracts.push(disclosed(net, factory, excludeDebug));
    return { factoryId: factory.contractId, transferKind, choiceContext: context };
  });

  for (const choice of ['accept', 'reject', 'withdraw'] as const) {
    const name = `getTransferInstruction${choice[0]!.toUpperCase()}${choice.slice(1)}Context`;
    app.post(`${BASE}/:id/choice-contexts/${choice}`, config(name), async (req) => {
      const body = decode(ContextRequestSchema, req.body);
      const id = (req.params as { id: string }).id;
      const instr = net.store.get(id);
      if (instr?.templateId.entityName !== 'AmuletTransferInstruction')
        throw spliceError(404, `AmuletTransferInstruction not found for contract id ${id}`);
      // The lock is always expired through the open round, as in the real contexts.
      return choiceContext(
        net,
        { 'amulet-rules': net.amuletRules(), 'open-round': net.latestRound().contract },
        { 'expire-lock': { tag: 'AV_Bool', value: true } },
        body?.excludeDebugFields ?? false,
      );
    });
  }
}
