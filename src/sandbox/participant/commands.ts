/**
 * Classic (non-interactive) command submission on the sandbox participant.
 */
import type { FastifyInstance } from 'fastify';
import {
  JsCommandsSchema,
  SubmitAndWaitForReassignmentRequestSchema,
} from '../../canton/ledger-api/schemas.js';
import type { SandboxContext } from '../context.js';
import { cantonError, E } from '../errors.js';
import { config, decode, participantAccess } from './access.js';

export function registerCommandRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf } = participantAccess(ctx);

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
}
