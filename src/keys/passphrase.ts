/**
 * Where secrets for key custody come from: an environment variable, a file
 * named by one, or an interactive prompt on a terminal. Never a command-line
 * argument (it would show in `ps` and in shell history). The value is never
 * logged and never part of an error message; a variable holding it leaves the
 * process environment once read (no child inherits it; /proc/<pid>/environ,
 * the environment the process started with, keeps it: the files are the way
 * to keep it out of sight), and a file holding it must be private (0600).
 */
import { closeSync, fstatSync, openSync, readFileSync } from 'node:fs';
import { KeyError } from './backend.js';

export interface SecretSource {
  /** Name of the variable holding the secret, e.g. CANTON_SIGNER_PASSPHRASE. */
  env: string;
  /** Name of the variable holding a file path, e.g. CANTON_SIGNER_PASSPHRASE_FILE. */
  fileEnv: string;
  /** What to call the secret in prompts and errors. */
  what: string;
  /** Error code when there is none. */
  missing: 'no_passphrase' | 'no_pin';
}

export const PASSPHRASE: SecretSource = {
  env: 'CANTON_SIGNER_PASSPHRASE',
  fileEnv: 'CANTON_SIGNER_PASSPHRASE_FILE',
  what: 'keystore passphrase',
  missing: 'no_passphrase',
};

export const PKCS11_PIN: SecretSource = {
  env: 'CANTON_SIGNER_PKCS11_PIN',
  fileEnv: 'CANTON_SIGNER_PKCS11_PIN_FILE',
  what: 'PKCS#11 PIN',
  missing: 'no_pin',
};

/**
 * The secret from the environment or its file; undefined when neither is set.
 *
 * Taken from the variable, it is removed from this process's environment
 * (`process.env`) at once, so that no child process inherits it; read it once
 * and keep it (`openSigner` does). A file must be readable by its owner only
 * (no group or other read bit), or it is refused, naming the file and the fix.
 */
export function secretFromEnv(src: SecretSource, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const direct = env[src.env];
  if (direct !== undefined && direct !== '') {
    // Also when `env` is a copy of the process environment: the process's own is what children inherit.
    if (process.env[src.env] === direct) delete process.env[src.env];
    return direct;
  }
  const file = env[src.fileEnv];
  if (file === undefined || file === '') return undefined;
  let text: string;
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    // Checked on the open file (no swap between the check and the read); Windows has no such mode bits.
    const mode = fstatSync(fd).mode;
    if (process.platform !== 'win32' && (mode & 0o044) !== 0)
      throw new KeyError(
        'keystore_io',
        `the ${src.what} file ${file} (named by ${src.fileEnv}) is readable by ${mode & 0o004 ? 'other users' : 'its group'} (mode ${(mode & 0o777).toString(8).padStart(3, '0')}): make it readable by its owner only (chmod 600 ${file}), then try again`,
      );
    text = readFileSync(fd, 'utf8');
  } catch (e) {
    if (e instanceof KeyError) throw e;
    throw new KeyError(
      'keystore_io',
      `cannot read the ${src.what} file ${file} (named by ${src.fileEnv}) (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
      { cause: e },
    );
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  const value = text.replace(/\r?\n$/, '');
  if (value === '') throw new KeyError(src.missing, `the ${src.what} file named by ${src.fileEnv} is empty`);
  return value;
}

/** The shortest passphrase a new keystore takes, in characters (after NFC normalisation). */
export const MIN_PASSPHRASE_LENGTH = 12;

/** Whether `p` is shorter than MIN_PASSPHRASE_LENGTH characters; never says what `p` is. */
export function isShortPassphrase(p: string): boolean {
  return [...p.normalize('NFC')].length < MIN_PASSPHRASE_LENGTH;
}

/** Reads a line from the terminal without echoing it. */
export async function promptSecret(question: string): Promise<string> {
  const { stdin, stderr } = process;
  if (!stdin.isTTY) throw new Error('no terminal to prompt on');
  stderr.write(question);
  stdin.setRawMode(true);
  stdin.resume();
  stdin.setEncoding('utf8');
  return new Promise((resolve, reject) => {
    let value = '';
    const done = (err?: Error) => {
      stdin.setRawMode(false);
      stdin.pause();
      stdin.removeListener('data', onData);
      stderr.write('\n');
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n') return done();
        if (ch === '\u0003') return done(new KeyError('no_passphrase', 'cancelled'));
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else value += ch;
      }
    };
    stdin.on('data', onData);
  });
}

/**
 * The secret from the environment, its file, or (on a terminal, when
 * `interactive`) a prompt; a KeyError naming the variables otherwise.
 */
export async function getSecret(
  src: SecretSource,
  opts: { interactive?: boolean; confirm?: boolean; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  const fromEnv = secretFromEnv(src, opts.env);
  if (fromEnv !== undefined) return fromEnv;
  if (opts.interactive && process.stdin.isTTY) {
    const first = await promptSecret(`${src.what}: `);
    if (opts.confirm) {
      const again = await promptSecret(`repeat ${src.what}: `);
      if (again !== first) throw new KeyError(src.missing, `the two ${src.what} entries differ`);
    }
    if (first === '') throw new KeyError(src.missing, `empty ${src.what}`);
    return first;
  }
  throw new KeyError(
    src.missing,
    `no ${src.what}: set ${src.env} or ${src.fileEnv}${opts.interactive ? ', or run on a terminal' : ''}`,
  );
}
