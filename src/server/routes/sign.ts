/**
 * /v1/sign routes. (Being written: see issue 6.)
 */
import type { FastifyInstance } from 'fastify';
import type { ServiceDeps } from '../deps.js';

export async function signRoutes(_app: FastifyInstance, _deps: ServiceDeps): Promise<void> {}
