/**
 * Named shutdown handlers, run in reverse order of registration on SIGTERM/SIGINT (so what was
 * started last stops first: the API stops accepting before its pool closes). A second signal,
 * or a handler that hangs past the deadline, ends the process at once.
 */
import type { Logger } from 'pino';

export class ShutdownManager {
  private readonly handlers: { name: string; stop: () => Promise<void> }[] = [];
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly deadlineMs = 30_000,
  ) {}

  register(name: string, stop: () => Promise<void>): void {
    this.handlers.push({ name, stop });
  }

  /** Installs the signal handlers; call once from main.ts. */
  listen(
    exit: (code: number) => void = (code) => process.exit(code),
    signals: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT'],
  ): void {
    const onSignal = (signal: NodeJS.Signals): void => {
      if (this.stopping) {
        this.logger.warn({ signal }, 'second signal: exiting now');
        exit(1);
        return;
      }
      this.logger.info({ signal }, 'shutting down');
      void this.shutdown().then(
        () => exit(0),
        () => exit(1),
      );
    };
    for (const signal of signals) process.on(signal, onSignal);
  }

  shutdown(): Promise<void> {
    this.stopping ??= this.runHandlers();
    return this.stopping;
  }

  private async runHandlers(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`shutdown took longer than ${this.deadlineMs} ms`)), this.deadlineMs);
    });
    let failed = false;
    try {
      for (const h of [...this.handlers].reverse()) {
        // Each step's duration is logged: a slow stop names the step that held it.
        const t0 = performance.now();
        const ms = (): number => Math.round(performance.now() - t0);
        try {
          await Promise.race([h.stop(), deadline]);
          this.logger.info({ handler: h.name, ms: ms() }, 'stopped');
        } catch (err) {
          failed = true;
          this.logger.error({ handler: h.name, ms: ms(), err }, 'stop failed');
          if (err instanceof Error && err.message.startsWith('shutdown took longer')) break;
        }
      }
    } finally {
      clearTimeout(timer);
    }
    if (failed) throw new Error('shutdown incomplete');
  }
}
