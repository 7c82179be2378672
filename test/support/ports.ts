/**
 * Ports for servers a test starts later (a child process, a block of a doc, a receiver meant to
 * be down). They are taken below the kernel's ephemeral range (32768 and up on Linux): a port from
 * that range, free when checked, could be handed to another test's listen(0) before the server
 * meant for it binds, and a client would then reach the wrong server.
 */
import { createServer } from 'node:net';

/** A port that was free just now, from 20000–31999. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (free) return port;
  }
}
