/**
 * The default names of the JWT claims that carry a caller's roles and
 * parties (auth.rolesClaim, auth.partiesClaim). Kept apart from the
 * configuration schema so that the CLI can show them in its help without
 * loading it.
 */
export const DEFAULT_ROLES_CLAIM = 'canton_signer_roles';
export const DEFAULT_PARTIES_CLAIM = 'canton_signer_parties';
