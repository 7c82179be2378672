/**
 * Calling the service's API from the page: the same /v1 routes any client
 * calls, authenticated by the session cookie the browser sends. Every change
 * carries the session's CSRF token. An error answer becomes an `ApiFailure`
 * holding the service's code and sentence; a 401 means the session ended.
 */

let csrf: string | undefined;
const signedOutListeners: (() => void)[] = [];

export function setCsrf(token: string | undefined): void {
  csrf = token;
}

/** Called when the service answers 401: the session ended (idle, expired, signed out elsewhere). */
export function onSignedOut(fn: () => void): void {
  signedOutListeners.push(fn);
}

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrf !== undefined) headers['x-csrf-token'] = csrf;
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch {
    throw new ApiFailure(
      0,
      'unreachable',
      'The service could not be reached. Check the connection and retry.',
    );
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const e = (json ?? {}) as { code?: string; message?: string; field?: string };
    if (res.status === 401) for (const fn of signedOutListeners) fn();
    throw new ApiFailure(
      res.status,
      e.code ?? `http_${res.status}`,
      e.message ?? `The service answered ${res.status}.`,
      e.field,
    );
  }
  return json as T;
}

export const get = <T>(path: string) => api<T>('GET', path);
export const post = <T>(path: string, body: unknown = {}) => api<T>('POST', path, body);
export const put = <T>(path: string, body: unknown) => api<T>('PUT', path, body);

/** A query string from defined values. */
export function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}
