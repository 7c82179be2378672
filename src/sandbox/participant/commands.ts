/**
 * Classic (non-interactive) command submission on the sandbox participant:
 * submit-and-wait (plus its ForTransaction / ForTransactionTree forms) and
 * async submit, for local parties the user may act as. The command goes
 * through the same interpreter as prepare and is committed with the
 * participant's own authority; external parties are refused (they must sign
 * through interactive submission), as Canton does.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  JsCommandsSchema,
  SubmitAndWaitForReassignmentRequestSchema,
  TransactionFormatSchema,
} from '../../canton/ledger-api/schemas.js';
import type { SandboxContext } from '../context.js';
import { cantonError, E, SandboxError } from '../errors.js';
import type { Update } from '../ledger/store.js';
import { isPostSubmission, submitLocal } from '../submission.js';
import { config, decode, participantAccess } from './access.js';
import { interpret } from './interpret.js';
import { eventFilter, jsTransaction } from './render.js';

const ForTransactionSchema = z.strictObject({
  commands: JsCommandsSchema,
  transactionFormat: TransactionFormatSchema.optional(),
});

type Json = Record<string, unknown>;

export function registerCommandRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf, canRead } = participantAccess(ctx);

  /** Checks rights, interprets and commits `body`; throws what Canton answers on the submission. */
  const submit = (req: FastifyRequest, body: z.output<typeof JsCommandsSchema>) => {
    const user = userOf(req, body.userId);
    for (const p of body.actAs)
      if (!user.actAs.has(p)) throw E.permissionDenied(`user ${user.id} may not act as ${p}`);
    for (const p of body.readAs ?? [])
      if (!canRead(user, p)) throw E.permissionDenied(`user ${user.id} may not read as ${p}`);
    const external = body.actAs.filter((p) => net.parties.has(p));
    if (external.length > 0)
      throw cantonError(
        'NO_SYNCHRONIZER_ON_WHICH_ALL_SUBMITTERS_CAN_SUBMIT',
        9,
        `This participant cannot submit as the given submitter on any connected synchronizer: ${external.join(', ')} is an external party (confirmation permission only); use interactive submission`,
      );
    if (body.commands.length !== 1)
      throw E.invalidArgument(
        `the sandbox participant interprets one command per submission, got ${body.commands.length}`,
      );
    let prepared: ReturnType<typeof interpret>;
    try {
      prepared = interpret(net, {
        command: body.commands[0],
        actAs: body.actAs,
        commandId: body.commandId,
        disclosedContracts: body.disclosedContracts ?? [],
        synchronizerId: body.synchronizerId,
        local: true,
      });
    } catch (e) {
      // A classic submission has no prepare step: what prepare calls a failed preparation is an invalid request here.
      if (e instanceof SandboxError && e.code === 'FAILED_TO_PREPARE_TRANSACTION')
        throw E.invalidArgument(String((e.body as { cause?: string }).cause ?? e.message));
      throw e;
    }
    return submitLocal(net, {
      prepared,
      userId: user.id,
      submissionId: body.submissionId ?? randomUUID(),
      deduplicationPeriod: body.deduplicationPeriod,
    });
  };

  /** The default format: ACS delta, wildcard for the submitters and readers, verbose. */
  const defaultFilter = (body: z.output<typeof JsCommandsSchema>) =>
    eventFilter({
      filtersByParty: Object.fromEntries([...body.actAs, ...(body.readAs ?? [])].map((p) => [p, {}])),
    });

  app.post('/v2/commands/submit-and-wait', config('submitAndWait'), async (req) => {
    const body = decode(JsCommandsSchema, req.body);
    const { update, completionOffset } = submit(req, body);
    return { updateId: update.updateId, completionOffset };
  });

  app.post(
    '/v2/commands/submit-and-wait-for-transaction',
    config('submitAndWaitForTransaction'),
    async (req) => {
      const body = decode(ForTransactionSchema, req.body);
      const { update } = submit(req, body.commands);
      const fmt = body.transactionFormat;
      const filter = fmt ? eventFilter(fmt.eventFormat) : defaultFilter(body.commands);
      const shape =
        fmt?.transactionShape === 'TRANSACTION_SHAPE_LEDGER_EFFECTS'
          ? 'TRANSACTION_SHAPE_LEDGER_EFFECTS'
          : 'TRANSACTION_SHAPE_ACS_DELTA';
      return { transaction: jsTransaction(update, filter, shape, net.dso) };
    },
  );

  app.post(
    '/v2/commands/submit-and-wait-for-transaction-tree',
    config('submitAndWaitForTransactionTree'),
    async (req) => {
      const body = decode(JsCommandsSchema, req.body);
      const { update } = submit(req, body);
      return { transactionTree: transactionTree(update, defaultFilter(body), net.dso) };
    },
  );

  app.post('/v2/commands/async/submit', config('submit'), async (req) => {
    const body = decode(JsCommandsSchema, req.body);
    try {
      submit(req, body);
    } catch (e) {
      // After the synchronous checks a rejection is reported on the completion stream only.
      if (!(e instanceof SandboxError) || !isPostSubmission(e)) throw e;
    }
    return {};
  });

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
}

/** The legacy tree form: the ledger-effects events keyed by node id. */
function transactionTree(update: Update, filter: ReturnType<typeof eventFilter>, dso: string): Json {
  const tx = jsTransaction(update, filter, 'TRANSACTION_SHAPE_LEDGER_EFFECTS', dso) as Json;
  const eventsById: Record<string, Json> = {};
  for (const ev of tx.events as Json[]) {
    const created = ev.CreatedEvent as Json | undefined;
    const exercised = ev.ExercisedEvent as Json | undefined;
    if (created) eventsById[String(created.nodeId)] = { CreatedTreeEvent: { value: created } };
    if (exercised) eventsById[String(exercised.nodeId)] = { ExercisedTreeEvent: { value: exercised } };
  }
  const { events: _events, ...rest } = tx;
  return { ...rest, eventsById };
}
