/**
 * /v1/air-gap: the online side of air-gapped signing. The export
 * key an offline signer must trust (read: 404 `export_key_missing` until an
 * admin creates it with the POST, audited as `key.put`); the sealed requests waiting for an
 * offline signature (a withdrawal of a cold party parks in
 * `awaiting_signature` with one; `POST /sign/execute` for a cold party
 * answers 202 with one); and the import of a response, which is checked
 * (src/offline/online.ts) and then carries the flow on: the withdrawal goes
 * back to the worker, a sign request is executed now.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { TopologyExport } from '../../flows/air-gap.js';
import { onboardViaLedgerApi, onboardViaValidator } from '../../flows/onboard.js';
import { signAndExecute } from '../../flows/sign-execute.js';
import { resumeAfterImport } from '../../flows/withdrawal-air-gap.js';
import type { KeyDescription } from '../../keys/signer.js';
import { AirGapError, AirGapResponseSchema } from '../../offline/format.js';
import type { ExportRecord } from '../../store/repos/air-gap.js';
import type { ServiceDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import type { Role } from '../roles.js';
import { out, s } from '../schema.js';
import { actorOf, flowsFor } from './context.js';
import { WithdrawalView, withdrawalView } from './withdrawals.js';

const READERS: Role[] = ['operator', 'admin', 'auditor'];
const ADMINS: Role[] = ['admin'];
const CARRIERS: Role[] = ['operator'];
const STATUSES = ['open', 'imported', 'stale', 'cancelled', 'done'] as const;

const ExportView = z.object({
  id: z.string(),
  kind: z.enum(['prepared-transaction', 'topology-transactions']),
  status: z.enum(STATUSES),
  party: z.string(),
  keyFingerprint: z.string(),
  hashes: z.array(z.string()).describe('hex of each hash the request asks to be signed'),
  withdrawalId: z.string().optional(),
  subject: z.string(),
  windowLatest: z.string().describe('the request must be signed and imported before this'),
  digest: z.string(),
  nonce: z.string(),
  createdAt: z.string(),
  importedAt: z.string().optional(),
});

function exportView(x: ExportRecord): z.output<typeof ExportView> {
  return {
    id: x.id,
    kind: x.kind,
    status: x.status,
    party: x.party,
    keyFingerprint: x.keyFingerprint,
    hashes: x.hashes,
    ...(x.withdrawalId ? { withdrawalId: x.withdrawalId } : {}),
    subject: x.subject,
    windowLatest: x.windowLatest,
    digest: x.digest,
    nonce: x.nonce,
    createdAt: x.createdAt,
    ...(x.importedAt ? { importedAt: x.importedAt } : {}),
  };
}

const ExportWithEnvelope = z.object({
  export: ExportView,
  envelope: z
    .record(z.string(), z.unknown())
    .describe('the sealed request (docs/air-gap-request.schema.json)'),
});

const ListQuery = z.object({
  status: z.enum(STATUSES).optional(),
  party: z.string().min(1).max(400).optional(),
  withdrawalId: z.uuid().optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});

const IdParams = z.object({ id: z.uuid({ message: 'not an export id' }) });

const ExportBody = z.strictObject({
  withdrawalId: z.uuid({ message: 'not a withdrawal id' }).describe('a withdrawal in awaiting_signature'),
});

const ExportKeyView = z.object({
  label: z.string(),
  scheme: z.string(),
  fingerprint: z.string(),
  publicKey: z.string().describe('SubjectPublicKeyInfo DER, base64'),
  pem: z.string(),
});

function exportKeyView(k: KeyDescription): z.output<typeof ExportKeyView> {
  const b64 = Buffer.from(k.publicKeySpki).toString('base64');
  return {
    label: k.label,
    scheme: k.scheme,
    fingerprint: k.fingerprint,
    publicKey: b64,
    pem: `-----BEGIN PUBLIC KEY-----\n${b64.match(/.{1,64}/g)?.join('\n')}\n-----END PUBLIC KEY-----\n`,
  };
}

const ImportResult = z.object({
  export: ExportView,
  /** A withdrawal goes back to the worker. */
  withdrawal: WithdrawalView.optional(),
  /** An onboarding is run again and completes. */
  onboarded: z
    .object({ partyId: z.string(), status: z.string(), warnings: z.array(z.string()).optional() })
    .optional(),
  /** A sign request is executed at once. */
  executed: z
    .object({ updateId: z.string(), commandId: z.string(), completionOffset: z.number() })
    .optional(),
});

export async function airGapRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  app.get(
    '/air-gap/export-key',
    {
      config: { roles: READERS },
      schema: {
        tags: ['air-gap'],
        summary:
          'The key that seals exported requests: give its public key to the offline signer (--trust); 404 export_key_missing until an admin creates it',
        response: {
          200: out(
            ExportKeyView,
            'the export key exists: its public key, to give to the offline signer (--trust)',
          ),
        },
      },
    },
    async () => {
      try {
        return exportKeyView(await deps.airGap.exportKey());
      } catch (e) {
        if (e instanceof AirGapError && e.code === 'export_key_missing')
          throw new ApiError(404, e.code, e.message);
        throw e;
      }
    },
  );

  app.post(
    '/air-gap/export-key',
    {
      config: { roles: ADMINS },
      schema: {
        tags: ['air-gap'],
        summary:
          'Create the export key (Ed25519, file keystore; audited as key.put): 201, or 200 with the existing key',
        response: {
          200: out(
            ExportKeyView,
            'the export key existed already: it is answered unchanged (nothing is created)',
          ),
          201: out(ExportKeyView, 'the export key was created now (audited as key.put)'),
        },
      },
    },
    async (request, reply) => {
      const { key, created } = await deps.airGap.createExportKey(actorOf(request));
      return reply.status(created ? 201 : 200).send(exportKeyView(key));
    },
  );

  app.get(
    '/air-gap/exports',
    {
      config: { roles: READERS },
      schema: {
        tags: ['air-gap'],
        summary: 'Exported signing requests, newest first (filters: status, party, withdrawal)',
        querystring: s(ListQuery),
        response: {
          200: out(
            z.object({ items: z.array(ExportView) }),
            'the exports matching the filters, newest first (an empty list when none)',
          ),
        },
      },
    },
    async (request) => {
      const q = request.query as z.output<typeof ListQuery>;
      const items = await deps.store.airGap.list({
        limit: q.limit,
        ...(q.status ? { status: q.status } : {}),
        ...(q.party ? { party: q.party } : {}),
        ...(q.withdrawalId ? { withdrawalId: q.withdrawalId } : {}),
      });
      return { items: items.map(exportView) };
    },
  );

  app.get(
    '/air-gap/exports/:id',
    {
      config: { roles: CARRIERS },
      schema: {
        tags: ['air-gap'],
        summary: 'One export with its sealed request (what `canton-signer offline sign` reads)',
        params: s(IdParams),
        response: {
          200: out(ExportWithEnvelope, 'the export with its sealed request, to carry to the offline signer'),
        },
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      const x = await deps.store.airGap.get(id);
      if (!x) throw new ApiError(404, 'not_found', `export ${id} not found`, 'params.id');
      return { export: exportView(x), envelope: x.envelope as Record<string, unknown> };
    },
  );

  app.post(
    '/air-gap/exports',
    {
      config: { roles: CARRIERS },
      schema: {
        tags: ['air-gap'],
        summary: 'The sealed request of a withdrawal awaiting an offline signature (409 when it awaits none)',
        body: s(ExportBody),
        response: {
          200: out(
            ExportWithEnvelope,
            'the export with its sealed request (what `canton-signer offline sign` reads)',
          ),
        },
      },
    },
    async (request) => {
      const { withdrawalId } = request.body as z.output<typeof ExportBody>;
      const w = await deps.store.withdrawals.get(withdrawalId);
      if (!w)
        throw new ApiError(404, 'not_found', `withdrawal ${withdrawalId} not found`, 'body.withdrawalId');
      const x = await deps.store.airGap.currentFor(w.id);
      if (w.state !== 'awaiting_signature' || !x || x.status !== 'open')
        throw new ApiError(
          409,
          'not_awaiting_signature',
          `withdrawal ${w.id} is ${w.state}${x ? ` (its export ${x.id} is ${x.status})` : ''}: it awaits no offline signature now` +
            (w.state === 'prepared' || w.state === 'received'
              ? '; the worker exports a request when it reaches the signature'
              : ''),
          'body.withdrawalId',
        );
      return { export: exportView(x), envelope: x.envelope as Record<string, unknown> };
    },
  );

  app.post(
    '/air-gap/imports',
    {
      config: { roles: CARRIERS },
      bodyLimit: 1024 * 1024,
      schema: {
        tags: ['air-gap'],
        summary:
          'Import an offline signer’s response: checked (nonce once, digest, party, hashes, signatures against the registered key, window) and the flow goes on',
        body: s(AirGapResponseSchema.describe('the response (docs/air-gap-response.schema.json)')),
        response: {
          200: out(
            ImportResult,
            'the response was accepted and the flow it was exported for went on: its outcome',
          ),
        },
      },
    },
    async (request) => {
      const actor = actorOf(request);
      const { export: x } = await deps.airGap.importResponse(request.body, actor);
      return carryOn(deps, request, x);
    },
  );

  app.post(
    '/air-gap/exports/:id/continue',
    {
      config: { roles: CARRIERS },
      schema: {
        tags: ['air-gap'],
        summary:
          'Carry an imported export on again (after its import answered an error while executing or onboarding); 409 unless imported',
        params: s(IdParams),
        response: {
          200: out(ImportResult, 'the imported export was carried on: its outcome'),
        },
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      const x = await deps.store.airGap.get(id);
      if (!x) throw new ApiError(404, 'not_found', `export ${id} not found`, 'params.id');
      if (x.status !== 'imported')
        throw new ApiError(409, 'invalid_state', `export ${id} is ${x.status}, not imported`, 'params.id');
      return carryOn(deps, request, x);
    },
  );
}

/**
 * What an imported response leads to: a withdrawal goes back to the worker;
 * an onboarding or a sign-and-execute request runs now, with the export's
 * signature claimed for exactly that run (`carryOnImported`: a run that fails
 * gives the import back, so the same response can be imported again); a
 * sign-only request ends (the response holds the signature).
 */
async function carryOn(
  deps: ServiceDeps,
  request: FastifyRequest,
  x: ExportRecord,
): Promise<z.output<typeof ImportResult>> {
  const actor = actorOf(request);
  if (x.withdrawalId) {
    const w = await resumeAfterImport(deps.store, x, actor, (id) => deps.worker.kick(id));
    return { export: exportView(x), ...(w ? { withdrawal: withdrawalView(w) } : {}) };
  }
  const finish = async (details: Record<string, string>) => {
    await deps.store.airGap.settle(x.id, 'done', actor, details);
    return exportView((await deps.store.airGap.get(x.id)) ?? x);
  };
  if (x.kind === 'topology-transactions') {
    const o = x.context.onboarding as TopologyExport['onboarding'] | undefined;
    if (!o) return { export: await finish({ reason: 'no onboarding recorded' }) };
    const ctx = flowsFor(deps, request, { writesParties: true });
    // Run again with the options it was asked with (participant pinned, rights grant declined).
    const asked = {
      hint: o.hint,
      keyLabel: o.keyLabel,
      ...(o.participantId !== undefined ? { participantId: o.participantId } : {}),
      ...(o.grantRights === false ? { grantRights: false } : {}),
    };
    const r = await deps.airGap.carryOnImported(x, actor, () =>
      o.path === 'validator'
        ? onboardViaValidator(ctx, asked)
        : onboardViaLedgerApi(ctx, {
            ...asked,
            ...(o.synchronizerId ? { synchronizerId: o.synchronizerId } : {}),
          }),
    );
    return {
      export: await finish({ partyId: r.party.partyId, status: r.status }),
      onboarded: {
        partyId: r.party.partyId,
        status: r.status,
        ...(r.warnings?.length ? { warnings: r.warnings } : {}),
      },
    };
  }
  if (x.context.flow === 'sign')
    return { export: await finish({ reason: 'sign-only: the response is the result' }) };
  const req = (x.envelope as { request: Record<string, unknown> }).request;
  const r = await deps.airGap.carryOnImported(x, actor, () =>
    signAndExecute(flowsFor(deps, request), {
      partyId: x.party,
      preparedTransaction: String(req.preparedTransaction),
      claimedHash: String(req.claimedHash),
      scheme: req.hashingScheme === 'v3' ? 'v3' : 'v2',
      intent: req.intent,
      commandId: String(req.commandId),
    }),
  );
  return {
    export: await finish({ updateId: r.result.updateId }),
    executed: {
      updateId: r.result.updateId,
      commandId: r.result.commandId,
      completionOffset: r.result.completionOffset,
    },
  };
}
