/**
 * The console's views, in navigation order. Each names the roles whose API
 * routes it reads; the navigation offers a view only to those roles (the
 * API refuses the rest anyway).
 */
import type { View } from './context.js';
import { renderApprovals } from './view-approvals.js';
import { renderAudit } from './view-audit.js';
import { renderKeys } from './view-keys.js';
import { renderParties } from './view-parties.js';
import { renderPasskeys } from './view-passkeys.js';
import { renderPolicy } from './view-policy.js';
import { renderWithdrawals } from './view-withdrawals.js';

export const VIEWS: View[] = [
  {
    path: 'approvals',
    title: 'Approvals',
    roles: ['approver', 'admin', 'operator', 'auditor'],
    render: renderApprovals,
  },
  {
    path: 'withdrawals',
    title: 'Withdrawals',
    roles: ['withdrawer', 'operator', 'auditor'],
    render: renderWithdrawals,
  },
  {
    path: 'parties',
    title: 'Parties',
    roles: ['admin', 'operator', 'auditor', 'withdrawer'],
    render: renderParties,
  },
  { path: 'keys', title: 'Keys', roles: ['admin', 'auditor'], render: renderKeys },
  { path: 'audit', title: 'Audit log', roles: ['auditor', 'admin'], render: renderAudit },
  {
    path: 'policy',
    title: 'Policy',
    roles: ['admin', 'operator', 'approver', 'auditor'],
    render: renderPolicy,
  },
  { path: 'passkeys', title: 'Passkeys', roles: ['approver', 'admin', 'auditor'], render: renderPasskeys },
];
