/**
 * Interactive submission on the sandbox participant: prepare (with the fault
 * switches that make the participant lie) and the execute family, whose
 * post-submission rejections surface on the completion stream as Canton's do.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  JsExecuteSubmissionAndWaitForTransactionRequestSchema,
  JsExecuteSubmissionRequestSchema,
  JsPrepareSubmissionRequestSchema,
} from '../../canton/ledger-api/schemas.js';
import { bytesToBase64 } from '../../hashing/input.js';
import type { HashingScheme } from '../../hashing/transaction-hash.js';
import type { SandboxContext } from '../context.js';
import { E, SandboxError } from '../errors.js';
import { parseIsoMicros } from '../ledger/clock.js';
import {
  executeSubmission,
  forgetPreparation,
  isPostSubmission,
  registerPreparation,
} from '../submission.js';
import { tamper } from '../tamper.js';
import { config, decode, participantAccess } from './access.js';
import { interpret } from './interpret.js';
import { eventFilter, jsTransaction } from './render.js';

const SCHEME: Record<string, HashingScheme> = {
  HASHING_SCHEME_VERSION_V2: 'v2',
  HASHING_SCHEME_VERSION_V3: 'v3',
};
const SCHEME_NAME = { v2: 'HASHING_SCHEME_VERSION_V2', v3: 'HASHING_SCHEME_VERSION_V3' } as const;

export function registerInteractiveRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf, canRead, canExecute } = participantAccess(ctx);

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
}
