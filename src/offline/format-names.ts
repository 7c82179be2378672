/**
 * The names (with version) of the air-gap documents, kept apart from their
 * schemas so that code which only recognises a document by its name (the
 * CLI's input sniffing) loads no validation library.
 */
export const REQUEST_FORMAT = 'canton-signer/air-gap-request@1';
export const RESPONSE_FORMAT = 'canton-signer/air-gap-response@1';
