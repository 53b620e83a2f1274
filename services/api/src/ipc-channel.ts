/**
 * A cluster worker's side of the IPC channel to its primary, as the shared counters use it (the
 * rate limits, limits-shared.ts; the stream slots, changes/slots-shared.ts): tests give an
 * in-memory pair instead.
 */
export interface PrimaryChannel<M> {
  /** Sends one message; if it cannot be delivered (the channel closed), calls `failed`. */
  send(message: M, failed: (err: Error) => void): void;
  /** Listens for the primary's messages, and for the channel closing; returns the unsubscribe. */
  listen(onMessage: (message: unknown) => void, onClosed: () => void): () => void;
}

/** The process's own IPC channel: in a cluster worker, the one to the primary. */
export function processChannel<M>(proc: NodeJS.Process = process): PrimaryChannel<M> {
  return {
    send(message, failed) {
      if (!proc.send || !proc.connected) return failed(new Error('the IPC channel is closed'));
      proc.send(message, (err: Error | null) => err && failed(err));
    },
    listen(onMessage, onClosed) {
      proc.on('message', onMessage);
      proc.on('disconnect', onClosed);
      return () => {
        proc.off('message', onMessage);
        proc.off('disconnect', onClosed);
      };
    },
  };
}
