/**
 * Passkeys in the browser: registering one (navigator.credentials.create,
 * attestation "none", user verification required) and signing an approval
 * with one (navigator.credentials.get). The challenge of an approval is the
 * 32-byte message the service verifies: SHA-256 of
 * `canton-signer/approval@1\n{"decision":"approve","statement":"<statement hash>"}`,
 * so the authenticator's signature covers exactly the statement shown.
 */

export function toB64u(bytes: ArrayBuffer | Uint8Array): string {
  const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  let s = '';
  for (const x of b) s += String.fromCharCode(x);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function fromB64u(text: string): Uint8Array<ArrayBuffer> {
  const b64 = text.replace(/-/g, '+').replace(/_/g, '/');
  const s = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** The message an approver's key signs for `decision` on the statement with this hash. */
export async function approvalChallenge(
  statementHash: string,
  decision: 'approve' | 'reject',
): Promise<Uint8Array<ArrayBuffer>> {
  const text = `canton-signer/approval@1\n${JSON.stringify({ decision, statement: statementHash })}`;
  return new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)));
}

export interface PasskeyAssertion {
  credentialId: string;
  authenticatorData: string;
  clientDataJSON: string;
  signature: string;
}

/** Signs `challenge` with the passkey `credentialId` (base64url) of relying party `rpId`. */
export async function signWithPasskey(
  rpId: string,
  credentialId: string,
  challenge: Uint8Array<ArrayBuffer>,
): Promise<PasskeyAssertion> {
  const cred = (await navigator.credentials.get({
    publicKey: {
      challenge,
      rpId,
      allowCredentials: [{ type: 'public-key', id: fromB64u(credentialId) }],
      userVerification: 'required',
      timeout: 120_000,
    },
  })) as PublicKeyCredential | null;
  if (!cred) throw new Error('No passkey answered.');
  const r = cred.response as AuthenticatorAssertionResponse;
  return {
    credentialId: toB64u(cred.rawId),
    authenticatorData: toB64u(r.authenticatorData),
    clientDataJSON: toB64u(r.clientDataJSON),
    signature: toB64u(r.signature),
  };
}

export interface RegistrationOptions {
  challenge: string;
  rp: { id: string; name: string };
  user: { id: string; name: string; displayName: string };
  excludeCredentials: string[];
}

/** Creates a passkey for the options the service gave; returns what the service verifies. */
export async function createPasskey(
  o: RegistrationOptions,
): Promise<{ clientDataJSON: string; attestationObject: string }> {
  const cred = (await navigator.credentials.create({
    publicKey: {
      challenge: fromB64u(o.challenge),
      rp: o.rp,
      user: { id: fromB64u(o.user.id), name: o.user.name, displayName: o.user.displayName },
      pubKeyCredParams: [
        { type: 'public-key', alg: -7 },
        { type: 'public-key', alg: -8 },
        { type: 'public-key', alg: -257 },
      ],
      authenticatorSelection: { userVerification: 'required', residentKey: 'preferred' },
      attestation: 'none',
      excludeCredentials: o.excludeCredentials.map((id) => ({ type: 'public-key', id: fromB64u(id) })),
      timeout: 120_000,
    },
  })) as PublicKeyCredential | null;
  if (!cred) throw new Error('No passkey was created.');
  const r = cred.response as AuthenticatorAttestationResponse;
  return { clientDataJSON: toB64u(r.clientDataJSON), attestationObject: toB64u(r.attestationObject) };
}
