// npm run bench:sign — signatures per second through the signer contract vs a raw loop over the
// same primitive in the same process: node:crypto for file keys, raw pkcs11js C_SignInit + C_SignAsync
// for SoftHSM2 (the call the backend makes; a synchronous C_Sign row is printed for reference).
// Prints a table and PASS/FAIL for the targets (contract overhead <= 10 %, file Ed25519 >= 10,000/s).
// Always exits 0: it is a report. Figures go to docs/performance.md by hand.
import { execFileSync } from 'node:child_process';
import { createHash, sign as cryptoSign, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';

const ROUND_MS = 700;
const ROUNDS = 5;

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

/** Runs `fn` (returns a promise or a value) back to back for ROUND_MS; returns ops/s. */
async function rate(fn) {
  const t0 = performance.now();
  let n = 0;
  while (performance.now() - t0 < ROUND_MS) {
    for (let i = 0; i < 64; i++) await fn();
    n += 64;
  }
  return (n * 1000) / (performance.now() - t0);
}

/** Interleaved rounds of two contenders; median of each. */
async function compare(a, b) {
  await rate(a);
  await rate(b);
  const ra = [];
  const rb = [];
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2 === 0) {
      ra.push(await rate(a));
      rb.push(await rate(b));
    } else {
      rb.push(await rate(b));
      ra.push(await rate(a));
    }
  }
  return [median(ra), median(rb)];
}

const fmt = (x) => Math.round(x).toLocaleString('en-US');
const rows = [];
const verdicts = [];

const { FileBackend } = await import('../dist/keys/file-backend.js');
const { Signer } = await import('../dist/keys/signer.js');
const { SCHEMES } = await import('../dist/keys/schemes.js');

console.log('canton-signer signing benchmark');
console.log(
  `node ${process.version}, ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), one process, sequential awaits`,
);
console.log('');

// ---- file keystore ------------------------------------------------------------------------
const dir = mkdtempSync(join(tmpdir(), 'cs-bench-'));
try {
  const file = new FileBackend({
    dir: join(dir, 'ks'),
    passphrase: () => 'bench',
    scrypt: { N: 2 ** 14, r: 8, p: 1 },
  });
  const signer = new Signer({ file });
  const msg = randomBytes(32);
  for (const scheme of ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1']) {
    const label = `bench-${scheme}`;
    await signer.generate({ label, scheme, backend: 'file' });
    await signer.sign(label, msg); // unlock once
    // The raw loop signs with the very key object the backend holds.
    const key = await file.unlocked.get(label);
    const digest = SCHEMES[scheme].digest;
    const raw =
      digest === null
        ? () => cryptoSign(null, msg, key)
        : () => cryptoSign(digest, msg, { key, dsaEncoding: 'der' });
    const [contract, rawRate] = await compare(
      () => signer.sign(label, msg),
      () => raw(),
    );
    const overhead = (rawRate / contract - 1) * 100;
    rows.push(['file', scheme, contract, rawRate, overhead]);
    verdicts.push([`file ${scheme}: contract overhead ${overhead.toFixed(1)} % <= 10 %`, overhead <= 10]);
    if (scheme === 'ed25519')
      verdicts.push([`file ed25519: ${fmt(contract)} sig/s >= 10,000`, contract >= 10_000]);
  }
  await signer.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// ---- PKCS#11 on SoftHSM2 ----------------------------------------------------------------------
const module = ['/usr/lib/softhsm/libsofthsm2.so', '/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so'].find(
  existsSync,
);
if (!module || !existsSync(new URL('../dist/keys/pkcs11-backend.js', import.meta.url))) {
  console.log(
    'SoftHSM2 (or the PKCS#11 backend) is not available: PKCS#11 rows skipped (apt-get install softhsm2).',
  );
} else {
  const hsmDir = mkdtempSync(join(tmpdir(), 'cs-bench-hsm-'));
  writeFileSync(
    join(hsmDir, 'softhsm2.conf'),
    `directories.tokendir = ${hsmDir}\nobjectstore.backend = file\nlog.level = ERROR\n`,
  );
  process.env.SOFTHSM2_CONF = join(hsmDir, 'softhsm2.conf');
  execFileSync(
    'softhsm2-util',
    ['--init-token', '--free', '--label', 'bench', '--pin', '1234', '--so-pin', '5678'],
    {
      stdio: 'ignore',
    },
  );
  const { Pkcs11Backend } = await import('../dist/keys/pkcs11-backend.js');
  const pkcs11js = (await import('pkcs11js')).default;
  const backend = await Pkcs11Backend.open({ module, token: 'bench', pin: '1234', sessions: 4 });
  const signer = new Signer({ pkcs11: backend, stateDir: hsmDir });
  const msg = randomBytes(32);
  // A raw pkcs11js handle of our own, same module and token, one session, synchronous C_Sign.
  const p11 = new pkcs11js.PKCS11();
  p11.load(module);
  try {
    p11.C_Initialize();
  } catch (e) {
    // The backend already initialised this library in this process: that is fine, it is shared.
    if (!String(e.message).includes('CKR_CRYPTOKI_ALREADY_INITIALIZED')) throw e;
  }
  try {
    const slot = p11.C_GetSlotList(true).find((s) => p11.C_GetTokenInfo(s).label.trim() === 'bench');
    const session = p11.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION | pkcs11js.CKF_RW_SESSION);
    try {
      p11.C_Login(session, pkcs11js.CKU_USER, '1234');
    } catch {
      // already logged in through the backend's sessions of this application
    }
    const schemes = (await backend.schemes()).filter((s) => s !== 'ecdsa-p384');
    for (const scheme of schemes) {
      const label = `bench-${scheme}`;
      await signer.generate({ label, scheme, backend: 'pkcs11' });
      p11.C_FindObjectsInit(session, [
        { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
        { type: pkcs11js.CKA_LABEL, value: label },
      ]);
      const [handle] = p11.C_FindObjects(session, 1);
      p11.C_FindObjectsFinal(session);
      const mech = scheme === 'ed25519' ? { mechanism: 0x1057 } : { mechanism: pkcs11js.CKM_ECDSA };
      const out = Buffer.alloc(256);
      const input = () => (scheme === 'ed25519' ? msg : createHash('sha256').update(msg).digest());
      // The same primitive the backend uses: C_SignInit, then C_Sign on the libuv pool (C_SignAsync),
      // so that a slow HSM never blocks the event loop.
      const rawAsync = () => {
        p11.C_SignInit(session, mech, handle);
        return p11.C_SignAsync(session, input(), out);
      };
      // For reference: synchronous C_Sign on the main thread (what the contract deliberately avoids).
      const rawSync = () => {
        p11.C_SignInit(session, mech, handle);
        return p11.C_Sign(session, input(), out);
      };
      const [contract, rawRate] = await compare(
        () => signer.sign(label, msg),
        () => rawAsync(),
      );
      const overhead = (rawRate / contract - 1) * 100;
      rows.push(['pkcs11 (SoftHSM2)', scheme, contract, rawRate, overhead]);
      verdicts.push([`pkcs11 ${scheme}: contract overhead ${overhead.toFixed(1)} % <= 10 %`, overhead <= 10]);
      rows.push([
        'pkcs11, raw synchronous C_Sign (reference)',
        scheme,
        Number.NaN,
        await rate(rawSync),
        Number.NaN,
      ]);
      // Throughput with concurrency (the pool signs in parallel).
      const t0 = performance.now();
      let n = 0;
      while (performance.now() - t0 < ROUND_MS * 2) {
        await Promise.all(Array.from({ length: 64 }, () => signer.sign(label, msg)));
        n += 64;
      }
      rows.push([
        'pkcs11, 64 in flight',
        scheme,
        (n * 1000) / (performance.now() - t0),
        Number.NaN,
        Number.NaN,
      ]);
    }
  } finally {
    // No C_Finalize here: the library is shared with the backend, which finalises it on close.
    await signer.close();
    rmSync(hsmDir, { recursive: true, force: true });
  }
}

console.log('| backend | scheme | contract sig/s | raw loop sig/s | contract overhead |');
console.log('|---|---|---:|---:|---:|');
for (const [b, s, c, r, o] of rows)
  console.log(
    `| ${b} | ${s} | ${Number.isNaN(c) ? '' : fmt(c)} | ${Number.isNaN(r) ? '' : fmt(r)} | ${Number.isNaN(o) ? '' : `${o.toFixed(1)} %`} |`,
  );
console.log('');
for (const [text, ok] of verdicts) console.log(`target: ${text}: ${ok ? 'PASS' : 'FAIL'}`);
console.log(`VERDICT: ${verdicts.every(([, ok]) => ok) ? 'PASS' : 'FAIL'}`);
