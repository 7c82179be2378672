/**
 * The slice of `oidc-provider` (which ships no types) that the test OpenID
 * provider (test/support/oidc.ts) uses: construct, serve as a Node request
 * handler, and the grant model for auto-granting consent.
 */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  export interface GrantInstance {
    jti: string;
    accountId: string;
    clientId: string;
    addOIDCScope(scope: string): void;
    addOIDCClaims(claims: string[]): void;
    save(): Promise<string>;
  }

  export interface KoaContextWithOIDC {
    oidc: {
      account?: { accountId: string };
      client?: { clientId: string };
      params?: Record<string, unknown>;
      result?: { consent?: { grantId?: string } };
      session?: { accountId?: string; grantIdFor(clientId: string): string | undefined };
      provider: Provider;
    };
  }

  export class Provider {
    constructor(issuer: string, configuration?: Record<string, unknown>);
    readonly issuer: string;
    proxy: boolean;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    Grant: {
      new (init: { accountId: string; clientId: string }): GrantInstance;
      find(id: string): Promise<GrantInstance | undefined>;
    };
  }

  export default Provider;
}
