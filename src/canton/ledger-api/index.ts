/** JSON Ledger API v2 client and wire schemas. */
export * from './client.js';
export * from './schemas.js';
