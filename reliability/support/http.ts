/**
 * HTTP/1.1 over a bare socket. Node's and undici's clients refuse exactly what a hostile client
 * sends (NUL and spaces in the request line, invalid header names and values, made-up methods,
 * conflicting framing), so the fuzzer writes its bytes itself and reads the answer with the
 * framing the server chose: Content-Length, chunked, or until the connection closes.
 */
import { connect } from 'node:net';
import { gunzipSync } from 'node:zlib';

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export type RawOutcome = { ok: true; answer: RawAnswer } | { ok: false; error: string };

/** Headers in order, repeated names kept. */
export type HeaderList = [string, string][];

export function serializeRequest(method: string, target: string, headers: HeaderList, body?: Buffer): Buffer {
  const head = `${method} ${target} HTTP/1.1\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
  return body ? Buffer.concat([Buffer.from(head, 'latin1'), body]) : Buffer.from(head, 'latin1');
}

interface Parsed {
  answer?: RawAnswer;
  /** Bytes of this answer, so a following one (after a 100 Continue) can be parsed. */
  consumed: number;
}

/** Parses one answer from `buf`; `closed` says no more bytes will come. */
function parseAnswer(buf: Buffer, closed: boolean, head: boolean): Parsed {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return { consumed: 0 };
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  if (!m) return { consumed: 0, answer: { status: -1, headers: {}, body: buf } };
  const status = Number(m[1]);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const i = line.indexOf(':');
    if (i <= 0) continue;
    const k = line.slice(0, i).trim().toLowerCase();
    const v = line.slice(i + 1).trim();
    headers[k] = k in headers ? `${headers[k]}, ${v}` : v;
  }
  const start = end + 4;
  if (head || status === 204 || status === 304 || (status >= 100 && status < 200))
    return { consumed: start, answer: { status, headers, body: Buffer.alloc(0) } };
  if (/\bchunked\b/i.test(headers['transfer-encoding'] ?? '')) {
    const parts: Buffer[] = [];
    let at = start;
    for (;;) {
      const lineEnd = buf.indexOf('\r\n', at);
      if (lineEnd < 0) return { consumed: 0 };
      const size = parseInt(buf.subarray(at, lineEnd).toString('latin1'), 16);
      if (!Number.isFinite(size))
        return { consumed: buf.length, answer: { status, headers, body: buf.subarray(start) } };
      if (size === 0) {
        const trailerEnd = buf.indexOf('\r\n\r\n', lineEnd);
        if (trailerEnd < 0 && !closed) return { consumed: 0 };
        return {
          consumed: trailerEnd < 0 ? buf.length : trailerEnd + 4,
          answer: { status, headers, body: Buffer.concat(parts) },
        };
      }
      if (buf.length < lineEnd + 2 + size + 2) return { consumed: 0 };
      parts.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
  }
  const length = headers['content-length'];
  if (length !== undefined && /^\d+$/.test(length)) {
    const n = Number(length);
    if (buf.length - start < n)
      return closed
        ? { consumed: buf.length, answer: { status, headers, body: buf.subarray(start) } }
        : { consumed: 0 };
    return { consumed: start + n, answer: { status, headers, body: buf.subarray(start, start + n) } };
  }
  return closed ? { consumed: buf.length, answer: { status, headers, body: buf.subarray(start) } } : { consumed: 0 };
}

/**
 * Sends `bytes` to host:port and resolves with the first final (non-1xx) answer, or why there was
 * none (refused, reset, closed without an answer, timed out).
 */
export function rawRequest(
  host: string,
  port: number,
  bytes: Buffer,
  opts: { timeoutMs: number; head?: boolean },
): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (outcome: RawOutcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish({ ok: false, error: 'timeout' }), opts.timeoutMs);
    const attempt = (closed: boolean) => {
      let buf = Buffer.concat(chunks);
      for (;;) {
        const { answer, consumed } = parseAnswer(buf, closed, opts.head ?? false);
        if (!answer) {
          if (closed) finish({ ok: false, error: buf.length ? 'incomplete answer' : 'closed without an answer' });
          return;
        }
        if (answer.status >= 100 && answer.status < 200) {
          buf = buf.subarray(consumed);
          continue;
        }
        return finish({ ok: true, answer });
      }
    };
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      attempt(false);
    });
    socket.on('end', () => attempt(true));
    socket.on('close', () => attempt(true));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // The answer may have arrived before a reset (the server closing on unread request bytes).
      if (chunks.length) attempt(true);
      finish({ ok: false, error: err.code ?? err.message });
    });
    // A write after the server closed (it answered early, e.g. 413) is not an error of the server.
    socket.write(bytes, () => undefined);
  });
}

/** The body as text, gunzipped when the answer says so (undefined when it does not inflate). */
export function bodyText(a: RawAnswer): string | undefined {
  try {
    const raw = /\bgzip\b/i.test(a.headers['content-encoding'] ?? '') ? gunzipSync(a.body) : a.body;
    return raw.toString('utf8');
  } catch {
    return undefined;
  }
}
