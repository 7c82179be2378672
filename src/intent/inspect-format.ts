/**
 * The name (with version) of the JSON document `inspect --json` prints, kept
 * apart from the report builder so that code which only recognises the
 * document by its name loads nothing else.
 */
export const INSPECT_FORMAT = 'canton-signer/inspect@1';
