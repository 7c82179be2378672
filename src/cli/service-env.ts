/**
 * How the commands that talk to a running service find it: its URL and
 * bearer token from the environment, the default address and the default
 * per-request timeout. Imports nothing, so command definitions can name them
 * in their help without loading the HTTP client.
 */
export const URL_ENV = 'CANTON_SIGNER_URL';
export const TOKEN_ENV = 'CANTON_SIGNER_TOKEN';
/** The service's default listen address (src/server/config.ts: listen.port 8080). */
export const DEFAULT_URL = 'http://127.0.0.1:8080';
export const DEFAULT_TIMEOUT_S = 30;
