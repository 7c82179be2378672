/**
 * How the command line words a failure of the system under it: one sentence
 * with the path or URL concerned and what to do next, the raw code kept in
 * brackets for searching. File-system errors (an errno code such as ENOENT,
 * ENOTDIR, EACCES, found on the error or its causes) and network errors (a
 * socket code such as ECONNREFUSED, or a timeout) each have one wording here;
 * commands give the context (what they were doing, which option names the
 * place) and never print a bare code.
 */
import { statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

interface Errno {
  code: string;
  path?: string;
}

/** The first error in `e`'s cause chain that carries an errno-style code (`E…`). */
export function errnoOf(e: unknown): Errno | undefined {
  const seen = new Set<unknown>();
  let cur: unknown = e;
  while (cur && typeof cur === 'object' && !seen.has(cur)) {
    seen.add(cur);
    const { code, path } = cur as { code?: unknown; path?: unknown };
    if (typeof code === 'string' && /^E[A-Z]+$/.test(code))
      return { code, ...(typeof path === 'string' ? { path } : {}) };
    cur = (cur as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The part of `path` that exists but is not a folder (what ENOTDIR is about), else `path`. */
function fileInTheWay(path: string): string {
  const parts: string[] = [];
  for (let p = resolve(path); ; p = dirname(p)) {
    parts.unshift(p);
    if (dirname(p) === p) break;
  }
  for (const p of parts) {
    try {
      if (!statSync(p).isDirectory()) return p;
    } catch {
      return path;
    }
  }
  return path;
}

/**
 * A file-system error in words: what is wrong with which path, then what to
 * do (`next` when the caller knows better, e.g. which option names the path).
 * Undefined when `e` carries no errno code.
 */
export function fileErrorText(e: unknown, opts: { path?: string; next?: string } = {}): string | undefined {
  const errno = errnoOf(e);
  if (!errno) return undefined;
  const path = errno.path ?? opts.path ?? 'the file';
  const said = (what: string, next: string) => `${what} (${errno.code}): ${opts.next ?? next}`;
  switch (errno.code) {
    case 'ENOENT':
      return said(`${path} does not exist`, 'check the path');
    case 'ENOTDIR':
      return said(
        `${fileInTheWay(path)} is a file where a folder is expected`,
        'give a folder path, or move the file away',
      );
    case 'EISDIR':
      return said(`${path} is a folder where a file is expected`, 'give the path of a file');
    case 'EACCES':
    case 'EPERM':
      return said(
        `no permission to use ${path}`,
        'check its owner and mode (ls -l), or run as the user it belongs to',
      );
    case 'EROFS':
      return said(`${path} is on a read-only file system`, 'choose a writable place');
    case 'ENOSPC':
    case 'EDQUOT':
      return said(`no space left where ${path} is`, 'free some space, then try again');
    case 'EEXIST':
      return said(`${path} already exists`, 'choose another name or remove it first');
    case 'EMFILE':
    case 'ENFILE':
      return said('too many open files', 'raise the limit (ulimit -n) or close other programs');
    default:
      return said(`${path}: ${errno.code}`, 'check the path and its permissions');
  }
}

/**
 * `<what> at <url>[ (<request>)]: <why>: <next>`: a request that got no
 * answer from `url`, why (the socket code, or a timeout), then `next`, the
 * caller's advice on starting the service or fixing the option that names it.
 * `ambiguous` adds that the request may have been carried out even so.
 */
export function networkErrorText(
  what: string,
  url: string,
  failure: {
    code?: string | undefined;
    request?: string;
    timeoutMs?: number | undefined;
    ambiguous?: boolean;
  },
  next: string,
): string {
  const code = failure.code;
  let why: string;
  if (code === undefined || code === 'TIMEOUT')
    why =
      failure.timeoutMs !== undefined
        ? `no answer within ${Math.round(failure.timeoutMs / 1000)} s (--timeout)`
        : 'no answer';
  else if (code === 'ECONNREFUSED') why = 'nothing answers there (ECONNREFUSED)';
  else if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
    why = `its host is not known (${code}: no DNS answer)`;
  else if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE')
    why = `the connection was closed before an answer (${code})`;
  else if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ETIMEDOUT')
    why = `it cannot be reached from here (${code})`;
  else if (/CERT|TLS|SSL/.test(code)) why = `the TLS connection failed (${code})`;
  else why = `the connection failed (${code})`;
  const request = failure.request !== undefined ? ` (${failure.request})` : '';
  const maybeDone = failure.ambiguous
    ? '; the request may have been carried out, so check its effect before repeating it'
    : '';
  return `${what} at ${url}${request}: ${why}: ${next}${maybeDone}`;
}

/**
 * A key error as the command line prints it, `<code>: <message>`; a keystore
 * file-system failure ends with the sentence of `fileErrorText` instead of a
 * bare `(ECODE)`.
 */
export function keyErrorText(e: { code: string; message: string; cause?: unknown }): string {
  const explained = e.code === 'keystore_io' ? fileErrorText(e.cause) : undefined;
  return `${e.code}: ${explained ? `${e.message.replace(/ \(E[A-Z]+\)$/, '')}: ${explained}` : e.message}`;
}
