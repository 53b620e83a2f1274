/**
 * Services run as deployed (`node --import tsx <main>`) for the tests that need real processes:
 * a process to kill, several processes sharing one store, a configuration only the process reads.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

/** A loopback port nothing listens on now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A service as deployed (`node --import tsx <main>`), its output kept for the failure message. */
export interface Service {
  name: string;
  child: ChildProcess;
  output: () => string;
  alive: () => boolean;
  /** SIGTERM, SIGKILL after 20 s; the exit code (null: killed). */
  stop: () => Promise<number | null>;
}

/** `env` over this process's environment; a variable given as undefined is unset. */
export function startService(name: string, main: string, env: Record<string, string | undefined>): Service {
  const child = spawn(process.execPath, ['--import', 'tsx', main], {
    // spawn leaves out variables whose value is undefined.
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (c: Buffer) => {
    output = (output + c.toString()).slice(-20_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const alive = () => child.exitCode === null && child.signalCode === null;
  return {
    name,
    child,
    output: () => output,
    alive,
    async stop() {
      if (alive()) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        await exited;
        clearTimeout(timer);
      }
      return exited;
    },
  };
}
