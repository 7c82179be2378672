/**
 * The console's views, in navigation order. Each names the roles whose API
 * routes it reads; the navigation offers a view only to those roles (the
 * API refuses the rest anyway).
 */
import type { View } from './context.js';
import { renderApprovals } from './view-approvals.js';
import { renderPasskeys } from './view-passkeys.js';

export const VIEWS: View[] = [
  {
    path: 'approvals',
    title: 'Approvals',
    roles: ['approver', 'admin', 'operator', 'auditor'],
    render: renderApprovals,
  },
  { path: 'passkeys', title: 'Passkeys', roles: ['approver', 'admin', 'auditor'], render: renderPasskeys },
];
