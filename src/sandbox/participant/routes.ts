/**
 * The sandbox participant's JSON Ledger API v2 (`/v2/...`): interactive
 * submission, external-party topology, updates, state, the authenticated
 * user and user rights, completions, with Canton's paths, shapes, statuses and JsCantonError bodies.
 * Request bodies are decoded with the same zod schemas the client uses; a body
 * that does not decode gets the JSON API's 400 `text/plain` answer.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import {
  AllocateExternalPartyRequestSchema,
  CompletionStreamRequestSchema,
  GenerateExternalPartyTopologyRequestSchema,
  GetActiveContractsRequestSchema,
  GetUpdateByOffsetRequestSchema,
  GetUpdatesRequestSchema,
  GrantUserRightsRequestSchema,
  JsCommandsSchema,
  JsExecuteSubmissionAndWaitForTransactionRequestSchema,
  JsExecuteSubmissionRequestSchema,
  JsPrepareSubmissionRequestSchema,
  RevokeUserRightsRequestSchema,
  SubmitAndWaitForReassignmentRequestSchema,
} from '../../canton/ledger-api/schemas.js';
import { bytesToBase64 } from '../../hashing/input.js';
import type { HashingScheme } from '../../hashing/transaction-hash.js';
import type { SandboxContext } from '../context.js';
import { cantonError, E, SandboxError } from '../errors.js';
import { parseIsoMicros } from '../ledger/clock.js';
import { LEDGER_API_USER, type SandboxNetwork, type SandboxUser } from '../network.js';
import { executeSubmission, forgetPreparation, registerPreparation } from '../submission.js';
import { tamper } from '../tamper.js';
import { allocateExternalParty, generateLedgerApiTopology } from '../topology.js';
import { interpret } from './interpret.js';
import { completionJson, createdEvent, eventFilter, jsTransaction, matchContract } from './render.js';

const SCHEME: Record<string, HashingScheme> = {
  HASHING_SCHEME_VERSION_V2: 'v2',
  HASHING_SCHEME_VERSION_V3: 'v3',
};
const SCHEME_NAME = { v2: 'HASHING_SCHEME_VERSION_V2', v3: 'HASHING_SCHEME_VERSION_V3' } as const;

/** Decodes a body like the JSON API: failures are 400 text/plain. */
function decode<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const at = issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)';
  throw new PlainError(`Invalid value for: body (${issue.message} at ${at})`);
}

/** The JSON API's request-decoding failure: 400 with a plain-text body. */
export class PlainError extends Error {
  override readonly name = 'PlainError';
}

const config = (operation: string) => ({
  config: { service: 'ledger-api', operation: `ledger-api.${operation}` },
});

/** The `limit` and `stream_idle_timeout_ms` query parameters of a streamed read (defaults 1000 and 1000 ms). */
function streamQuery(req: FastifyRequest): { limit: number; idleMs: number } {
  const q = req.query as Record<string, string | undefined>;
  const limit = q.limit === undefined ? 1000 : Number(q.limit);
  const idleMs = q.stream_idle_timeout_ms === undefined ? 1000 : Number(q.stream_idle_timeout_ms);
  if (!Number.isInteger(limit) || limit < 1) throw E.invalidArgument('limit must be a positive integer');
  if (!Number.isInteger(idleMs) || idleMs < 0)
    throw E.invalidArgument('stream_idle_timeout_ms must be a non-negative integer');
  return { limit, idleMs };
}

export function registerParticipantRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;

  /**
   * The acting user: the token's, else the request's `userId`, else the default user. With a
   * user token the body's userId must be the token's user, whatever the user's rights (§3.3);
   * without one, a token-only user cannot be named.
   */
  const userOf = (req: FastifyRequest, bodyUserId?: string): SandboxUser => {
    const tokenUser = req.sandboxUser;
    if (tokenUser !== undefined && bodyUserId !== undefined && bodyUserId !== tokenUser)
      throw E.permissionDenied(`userId ${bodyUserId} does not match the token's user ${tokenUser}`);
    const id = bodyUserId ?? tokenUser ?? LEDGER_API_USER;
    const user = net.users.get(id);
    if (!user)
      throw cantonError('USER_NOT_FOUND', 11, `User not found: ${id}`, { resources: [['USER_ID', id]] });
    if (user.tokenOnly && tokenUser === undefined)
      throw E.permissionDenied(`user ${id} acts only with its bearer token: the request has none`);
    return user;
  };
  const canRead = (u: SandboxUser, p: string) => u.actAs.has(p) || u.readAs.has(p);
  /**
   * Reads (completions, updates, active contracts) need CanReadAs or CanActAs for every party
   * asked about; a party-wildcard filter needs CanReadAsAnyParty, which the sandbox does not model:
   * it grants that to participant admins only.
   */
  const requireRead = (u: SandboxUser, parties: Iterable<string>, anyParty = false) => {
    for (const p of parties)
      if (!canRead(u, p)) throw E.permissionDenied(`user ${u.id} may not read as ${p}`);
    if (anyParty && !u.admin)
      throw E.permissionDenied(`user ${u.id} may not read as any party (CanReadAsAnyParty)`);
  };
  const canExecute = (u: SandboxUser, p: string) => u.actAs.has(p) || u.executeAs.has(p);
  const requireAdmin = (u: SandboxUser) => {
    if (!u.admin) throw E.permissionDenied('participant_admin right required');
  };

  // ---- interactive submission ------------------------------------------------------------------

  app.post('/v2/interactive-submission/prepare', config('prepare'), async (req) => {
    const body = decode(JsPrepareSubmissionRequestSchema, req.body);
    const user = userOf(req, body.userId);
    for (const p of [...body.actAs, ...(body.readAs ?? [])])
      if (!canRead(user, p)) throw E.permissionDenied(`user ${user.id} may not read as ${p}`);
    if (body.commands.length !== 1)
      throw E.failedToPrepare(
        `Only a single command is supported for external submissions, got ${body.commands.length}`,
      );
    // downgradeScheme: the participant ignores a request for V3 and hashes with V2 (max_record_time unsigned).
    const scheme = ctx.faults.take('ledger-api.prepare', 'downgradeScheme')
      ? 'v2'
      : SCHEME[body.hashingSchemeVersion ?? 'HASHING_SCHEME_VERSION_V2']!;
    const maxRecordTime = body.maxRecordTime === undefined ? undefined : parseIsoMicros(body.maxRecordTime);
    let prepared = interpret(net, {
      command: body.commands[0],
      actAs: body.actAs,
      commandId: body.commandId,
      disclosedContracts: body.disclosedContracts ?? [],
      synchronizerId: body.synchronizerId,
      maxRecordTime,
    });
    let claimedHash: Uint8Array | undefined;
    const t = ctx.faults.take('ledger-api.prepare', 'tamper');
    if (t?.kind === 'tamper') {
      const honest = registerPreparation(net, prepared, { scheme, userId: user.id });
      forgetPreparation(net, scheme, honest.hash); // the participant lies: the honest one is never executable
      prepared = tamper(net, prepared, t.change);
      if (t.hash === 'original') claimedHash = honest.hash;
    }
    if (ctx.faults.take('ledger-api.prepare', 'expiredRound')) {
      net.advanceRound();
      net.advanceRound();
    }
    const out = registerPreparation(net, prepared, {
      scheme,
      userId: user.id,
      ...(claimedHash ? { claimedHash } : {}),
    });
    const res: Record<string, unknown> = {
      preparedTransaction: out.preparedTransaction,
      preparedTransactionHash: bytesToBase64(out.hash),
      hashingSchemeVersion: SCHEME_NAME[scheme],
    };
    if (body.verboseHashing)
      res.hashingDetails = `sandbox: ${scheme.toUpperCase()} hash of the prepared transaction`;
    return res;
  });

  const execute = (req: FastifyRequest, schema: typeof JsExecuteSubmissionRequestSchema) => {
    const body = decode(schema, req.body);
    const user = userOf(req, body.userId);
    for (const ps of body.partySignatures.signatures)
      if (!canExecute(user, ps.party))
        throw E.permissionDenied(`user ${user.id} may not act or execute as ${ps.party}`);
    return {
      body,
      outcome: () =>
        executeSubmission(net, {
          preparedTransaction: body.preparedTransaction,
          partySignatures: body.partySignatures,
          scheme: SCHEME[body.hashingSchemeVersion]!,
          userId: user.id,
          submissionId: body.submissionId,
          deduplicationPeriod: body.deduplicationPeriod,
        }),
    };
  };

  app.post('/v2/interactive-submission/execute', config('execute'), async (req) => {
    const { outcome } = execute(req, JsExecuteSubmissionRequestSchema);
    try {
      outcome();
    } catch (e) {
      // Rejections after submission surface on the completion stream, not here.
      if (!(e instanceof SandboxError) || !isPostSubmission(e)) throw e;
    }
    return {};
  });

  app.post('/v2/interactive-submission/executeAndWait', config('executeAndWait'), async (req) => {
    const { outcome } = execute(req, JsExecuteSubmissionRequestSchema);
    const { update, completionOffset } = outcome();
    return { updateId: update.updateId, completionOffset };
  });

  app.post(
    '/v2/interactive-submission/executeAndWaitForTransaction',
    config('executeAndWaitForTransaction'),
    async (req) => {
      const body = decode(JsExecuteSubmissionAndWaitForTransactionRequestSchema, req.body);
      const { outcome } = execute(req, JsExecuteSubmissionRequestSchema.strip() as never);
      const { update } = outcome();
      const fmt = body.transactionFormat;
      const parties = body.partySignatures.signatures.map((s) => s.party);
      const filter = fmt
        ? eventFilter(fmt.eventFormat)
        : eventFilter({ filtersByParty: Object.fromEntries(parties.map((p) => [p, {}])) });
      const shape =
        fmt?.transactionShape === 'TRANSACTION_SHAPE_LEDGER_EFFECTS'
          ? 'TRANSACTION_SHAPE_LEDGER_EFFECTS'
          : 'TRANSACTION_SHAPE_ACS_DELTA';
      return { transaction: jsTransaction(update, filter, shape, net.dso) };
    },
  );

  // ---- external parties ------------------------------------------------------------------------

  app.post('/v2/parties/external/generate-topology', config('generateExternalPartyTopology'), async (req) => {
    const body = decode(GenerateExternalPartyTopologyRequestSchema, req.body);
    userOf(req);
    return generateLedgerApiTopology(body, topologyCtx(net));
  });

  app.post('/v2/parties/external/allocate', config('allocateExternalParty'), async (req) => {
    const body = decode(AllocateExternalPartyRequestSchema, req.body);
    const user = userOf(req);
    requireAdmin(user);
    const { partyId, party } = allocateExternalParty(body, topologyCtx(net));
    // Every check before anything is stored: a refused allocation changes nothing.
    const target = body.userId === undefined ? undefined : net.users.get(body.userId);
    if (body.userId !== undefined && !target)
      throw cantonError('USER_NOT_FOUND', 11, `User not found: ${body.userId}`, {
        resources: [['USER_ID', body.userId]],
      });
    if (net.parties.has(partyId) || net.localParties.has(partyId))
      throw cantonError(
        'PARTY_ALREADY_EXISTS',
        10,
        `Party already exists: party ${partyId} is already allocated on this node`,
        {
          resources: [['PARTY', partyId]],
        },
      );
    net.parties.set(partyId, party);
    target?.actAs.add(partyId);
    return { partyId };
  });

  // ---- commands (non-interactive) ------------------------------------------------------------------

  app.post(
    '/v2/commands/submit-and-wait-for-transaction-tree',
    config('submitAndWaitForTransactionTree'),
    async (req) => {
      const body = decode(JsCommandsSchema, req.body);
      const user = userOf(req, body.userId);
      for (const p of body.actAs)
        if (!user.actAs.has(p)) throw E.permissionDenied(`user ${user.id} may not act as ${p}`);
      const external = body.actAs.filter((p) => net.parties.has(p));
      if (external.length > 0)
        throw cantonError(
          'NO_SYNCHRONIZER_ON_WHICH_ALL_SUBMITTERS_CAN_SUBMIT',
          9,
          `This participant cannot submit as the given submitter on any connected synchronizer: ${external.join(', ')} is an external party (confirmation permission only); use interactive submission`,
        );
      throw E.failedToPrepare(
        'The sandbox participant does not interpret commands submitted by local parties',
      );
    },
  );

  app.post(
    '/v2/commands/submit-and-wait-for-reassignment',
    config('submitAndWaitForReassignment'),
    async (req) => {
      const body = decode(SubmitAndWaitForReassignmentRequestSchema, req.body);
      userOf(req, body.reassignmentCommands.userId);
      for (const c of body.reassignmentCommands.commands) {
        const cmd = c.command as Record<string, { value?: { source: string; target: string } } | undefined>;
        const v = cmd.AssignCommand?.value ?? cmd.UnassignCommand?.value;
        for (const s of v ? [v.source, v.target] : [])
          if (s !== net.synchronizerId)
            throw E.invalidArgument(
              `Unknown synchronizer ${s}: this participant is connected to ${net.synchronizerId} only`,
            );
      }
      throw E.invalidArgument('Source and target synchronizer are the same: nothing to reassign');
    },
  );

  app.post('/v2/commands/completions', config('completions'), async (req) => {
    const body = decode(CompletionStreamRequestSchema, req.body);
    const user = userOf(req, body.userId);
    requireRead(user, body.parties);
    const { limit, idleMs } = streamQuery(req);
    const begin = body.beginExclusive ?? 0;
    if (begin > net.store.ledgerEnd())
      throw cantonError(
        'OFFSET_AFTER_LEDGER_END',
        12,
        `Begin offset (${begin}) is after ledger end (${net.store.ledgerEnd()})`,
      );
    const pick = () =>
      net.store
        .completions(begin)
        .filter((c) => c.userId === user.id && c.actAs.some((p) => body.parties.includes(p)))
        .slice(0, limit);
    let found = pick();
    const deadline = Date.now() + Math.min(idleMs, 30_000);
    while (found.length === 0 && Date.now() < deadline) {
      await net.store.waitForChange(deadline - Date.now());
      found = pick();
    }
    return found.map((c) => ({ completionResponse: { Completion: { value: completionJson(c) } } }));
  });

  // ---- updates and state ---------------------------------------------------------------------------

  app.post('/v2/updates/update-by-offset', config('updateByOffset'), async (req) => {
    const body = decode(GetUpdateByOffsetRequestSchema, req.body);
    const user = userOf(req);
    const u = net.store.updateByOffset(body.offset);
    const fmt = body.updateFormat.includeTransactions;
    if (fmt) {
      const f = eventFilter(fmt.eventFormat);
      requireRead(user, f.byParty.keys(), f.anyParty !== undefined);
    }
    const notFound = () =>
      cantonError(
        'UPDATE_NOT_FOUND',
        11,
        `Update not found: no update at offset ${body.offset} visible to the requested parties`,
      );
    if (!u || !fmt) throw notFound();
    const tx = jsTransaction(u, eventFilter(fmt.eventFormat), fmt.transactionShape as never, net.dso) as {
      events: unknown[];
    };
    if (tx.events.length === 0) throw notFound();
    return { update: { Transaction: { value: tx } } };
  });

  app.post('/v2/updates', config('updates'), async (req) => {
    const body = decode(GetUpdatesRequestSchema, req.body);
    const user = userOf(req);
    const fmt = body.updateFormat.includeTransactions;
    if (!fmt)
      throw E.invalidArgument('updateFormat: the sandbox serves transactions only (includeTransactions)');
    const filter = eventFilter(fmt.eventFormat);
    requireRead(user, filter.byParty.keys(), filter.anyParty !== undefined);
    const { limit, idleMs } = streamQuery(req);
    const begin = body.beginExclusive;
    const end = body.endInclusive;
    if (begin > net.store.ledgerEnd())
      throw cantonError(
        'OFFSET_AFTER_LEDGER_END',
        12,
        `Begin offset (${begin}) is after ledger end (${net.store.ledgerEnd()})`,
      );
    const pick = () => {
      const out: unknown[] = [];
      for (const u of net.store.updates(begin, end ?? Number.POSITIVE_INFINITY)) {
        const tx = jsTransaction(u, filter, fmt.transactionShape as never, net.dso) as { events: unknown[] };
        if (tx.events.length > 0) out.push({ update: { Transaction: { value: tx } } });
        if (out.length >= limit) break;
      }
      return out;
    };
    let found = pick();
    // Open-ended: wait for something new until the idle timeout.
    const deadline = Date.now() + Math.min(idleMs, 30_000);
    while (end === undefined && found.length === 0 && Date.now() < deadline) {
      await net.store.waitForChange(deadline - Date.now());
      found = pick();
    }
    return found;
  });

  app.get('/v2/state/ledger-end', config('ledgerEnd'), async (req) => {
    userOf(req);
    return { offset: net.store.ledgerEnd() };
  });

  app.post('/v2/state/active-contracts', config('activeContracts'), async (req) => {
    const body = decode(GetActiveContractsRequestSchema, req.body);
    const user = userOf(req);
    const end = net.store.ledgerEnd();
    if (body.activeAtOffset > end)
      throw cantonError(
        'OFFSET_AFTER_LEDGER_END',
        12,
        `Active contracts at offset ${body.activeAtOffset} requested, but the ledger end is ${end}`,
      );
    const filter = eventFilter(body.eventFormat);
    requireRead(user, filter.byParty.keys(), filter.anyParty !== undefined);
    // One party's filter: only that party's contracts can match.
    const only = filter.anyParty || filter.byParty.size !== 1 ? undefined : [...filter.byParty.keys()][0];
    const candidates = net.store.activeAt(body.activeAtOffset, only);
    const out: unknown[] = [];
    for (const c of candidates) {
      const m = matchContract(filter, c);
      if (!m) continue;
      out.push({
        workflowId: '',
        contractEntry: {
          JsActiveContract: {
            createdEvent: createdEvent(c, c.createdOffset, 0, m.witnesses, m.match, net.dso),
            synchronizerId: net.synchronizerId,
            reassignmentCounter: 0,
          },
        },
      });
    }
    return out;
  });

  app.get('/v2/state/connected-synchronizers', config('connectedSynchronizers'), async (req) => {
    userOf(req);
    const q = req.query as Record<string, string | undefined>;
    if (q.participantId !== undefined && q.participantId !== net.participantId)
      return { connectedSynchronizers: [] };
    let permission = 'PARTICIPANT_PERMISSION_SUBMISSION';
    if (q.party !== undefined) {
      if (net.parties.has(q.party)) permission = 'PARTICIPANT_PERMISSION_CONFIRMATION';
      else if (!net.localParties.has(q.party)) return { connectedSynchronizers: [] };
    }
    return {
      connectedSynchronizers: [
        { synchronizerAlias: net.synchronizerAlias, synchronizerId: net.synchronizerId, permission },
      ],
    };
  });

  app.get('/v2/parties/participant-id', config('participantId'), async (req) => {
    userOf(req);
    return { participantId: net.participantId };
  });

  // ---- user rights -----------------------------------------------------------------------------------

  type RightJson = { kind: Record<string, { value: { party?: string } }> };
  const rightsOf = (u: SandboxUser): RightJson[] => [
    ...(u.admin ? [{ kind: { ParticipantAdmin: { value: {} } } }] : []),
    ...[...u.actAs].map((party) => ({ kind: { CanActAs: { value: { party } } } })),
    ...[...u.readAs].map((party) => ({ kind: { CanReadAs: { value: { party } } } })),
    ...[...u.executeAs].map((party) => ({ kind: { CanExecuteAs: { value: { party } } } })),
  ];
  const targetUser = (id: string) => {
    const u = net.users.get(id);
    if (!u)
      throw cantonError('USER_NOT_FOUND', 11, `User not found: ${id}`, { resources: [['USER_ID', id]] });
    return u;
  };
  const applyRights = (
    u: SandboxUser,
    rights: readonly { kind?: object | undefined }[],
    grant: boolean,
  ): RightJson[] => {
    const changed: RightJson[] = [];
    for (const r of rights) {
      const [name, inner] = Object.entries(r.kind ?? {})[0] ?? [];
      const party = (inner as { value?: { party?: string } } | undefined)?.value?.party;
      const set =
        name === 'CanActAs'
          ? u.actAs
          : name === 'CanReadAs'
            ? u.readAs
            : name === 'CanExecuteAs'
              ? u.executeAs
              : undefined;
      if (name === 'ParticipantAdmin') {
        if (u.admin !== grant) {
          u.admin = grant;
          changed.push({ kind: { ParticipantAdmin: { value: {} } } });
        }
        continue;
      }
      if (!set || party === undefined)
        throw E.invalidArgument(`The sandbox does not model the user right ${name ?? '(none)'}`);
      if (grant && !net.parties.has(party) && !net.localParties.has(party))
        throw E.invalidArgument(`Party not known on this participant: ${party}`);
      if (grant === set.has(party)) continue;
      if (grant) set.add(party);
      else set.delete(party);
      changed.push({ kind: { [name!]: { value: { party } } } });
    }
    return changed;
  };

  // The caller's own user (the token's, or the default user without a token), as Canton's `User`.
  app.get('/v2/authenticated-user', config('authenticatedUser'), async (req) => {
    const u = userOf(req);
    return {
      user: {
        id: u.id,
        ...(u.primaryParty !== undefined ? { primaryParty: u.primaryParty } : {}),
        isDeactivated: false,
        metadata: { resourceVersion: '0', annotations: {} },
        identityProviderId: '',
      },
    };
  });

  app.get('/v2/users/:userId/rights', config('listUserRights'), async (req) => {
    const caller = userOf(req);
    const id = (req.params as { userId: string }).userId;
    if (id !== caller.id) requireAdmin(caller);
    return { rights: rightsOf(targetUser(id)) };
  });

  app.post('/v2/users/:userId/rights', config('grantUserRights'), async (req) => {
    const body = decode(GrantUserRightsRequestSchema, req.body);
    requireAdmin(userOf(req));
    const id = (req.params as { userId: string }).userId;
    if (body.userId !== id)
      throw E.invalidArgument(`userId in the body (${body.userId}) differs from the path (${id})`);
    return { newlyGrantedRights: applyRights(targetUser(id), body.rights, true) };
  });

  app.patch('/v2/users/:userId/rights', config('revokeUserRights'), async (req) => {
    const body = decode(RevokeUserRightsRequestSchema, req.body);
    requireAdmin(userOf(req));
    const id = (req.params as { userId: string }).userId;
    if (body.userId !== id)
      throw E.invalidArgument(`userId in the body (${body.userId}) differs from the path (${id})`);
    return { newlyRevokedRights: applyRights(targetUser(id), body.rights, false) };
  });
}

export function topologyCtx(net: SandboxNetwork) {
  return { participantUid: net.participantId, synchronizerId: net.synchronizerId };
}

/** Errors the synchronizer (not the executing node's prechecks) produces: on `execute` they go to completions. */
function isPostSubmission(e: SandboxError): boolean {
  const c = e.code ?? '';
  return (
    c.startsWith('LOCAL_VERDICT_') || c === 'DUPLICATE_COMMAND' || c.includes('TIME') || c.includes('RECORD')
  );
}

export type { FastifyReply };
