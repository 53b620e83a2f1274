/**
 * The HTTP edge: everything the server can answer before (or instead of) a route handler, in the
 * one error shape of errors.ts. Node's HTTP parser and Fastify's router answer some requests on
 * their own — a malformed request line, headers over 16 KiB, an `Expect` Node cannot meet, a path
 * with bad percent-encoding or an over-long segment, a wrong method — and did so in their own
 * shapes (or with empty bodies). Each such answer is routed here instead.
 */
import { STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, badParameter } from './errors.js';

/** Deepest JSON nesting a request body may have: ours are two levels deep; a parser's stack is not. */
export const MAX_JSON_DEPTH = 32;

/** Raw bytes of an error answer for a socket that has no request object (parser errors). */
function rawErrorResponse(e: ApiError): string {
  const body = JSON.stringify(e.body());
  return (
    `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? 'Error'}\r\n` +
    'content-type: application/json; charset=utf-8\r\n' +
    'cache-control: no-store\r\n' +
    'connection: close\r\n' +
    `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

/** What Node's parser rejected, as one of our errors (the parser's error codes are `HPE_*`). */
export function parserError(err: NodeJS.ErrnoException): ApiError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError(431, 'headers_too_large', 'the request line and headers exceed 16 KiB');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
    case 'HPE_HEADERS_TIMEOUT':
      return new ApiError(408, 'request_timeout', 'the request was not received in time');
    default:
      return new ApiError(400, 'bad_request', 'malformed HTTP request');
  }
}

/** Fastify's `clientErrorHandler`: answers a request Node could not parse, in our shape. */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  // A reset or already destroyed socket has nobody to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (socket.writable) socket.end(rawErrorResponse(parserError(err)));
  else socket.destroy(err);
}

/** Fastify's `frameworkErrors`: the router's own refusals (bad percent-encoding, long segments). */
export function frameworkErrors(error: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const path = req.raw.url?.split('?')[0] ?? '';
  const e =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new ApiError(414, 'uri_too_long', 'a path segment is longer than 100 characters')
      : error.code === 'FST_ERR_BAD_URL'
        ? new ApiError(400, 'bad_request', `the path is not valid percent-encoding: '${path.slice(0, 200)}'`)
        : new ApiError(400, 'bad_request', 'the request could not be routed');
  void reply.code(e.status).header('cache-control', 'no-store').send(e.body());
}

/**
 * Node answers an `Expect` header other than 100-continue with an empty 417 unless someone listens
 * for `checkExpectation`; we listen and answer in our shape.
 */
export function answerExpectations(server: Server): void {
  server.on('checkExpectation', (req, res) => {
    const e = new ApiError(
      417,
      'expectation_failed',
      `cannot meet 'Expect: ${String(req.headers.expect).slice(0, 100)}'`,
    );
    const body = JSON.stringify(e.body());
    res
      .writeHead(417, {
        'content-type': 'application/json; charset=utf-8',
        'cache-control': 'no-store',
        'content-length': Buffer.byteLength(body),
        connection: 'close',
      })
      .end(body);
  });
}

/**
 * How deep `text` nests arrays and objects, scanning at most until `limit` is passed (strings are
 * skipped, escapes included). JSON.parse itself copes with deep input; the handlers' recursion
 * (String(), JSON.stringify of a nested value) does not, so depth is refused before parsing.
 */
export function exceedsDepth(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** The JSON body parser: empty, too deep and invalid bodies are 400s naming the body. */
export function parseJsonBody(
  _req: FastifyRequest,
  body: string,
  done: (err: Error | null, value?: unknown) => void,
): void {
  if (body.trim() === '') return done(badParameter('body', 'empty'));
  if (exceedsDepth(body, MAX_JSON_DEPTH))
    return done(badParameter('body', `nested deeper than ${MAX_JSON_DEPTH} levels`));
  try {
    done(null, JSON.parse(body));
  } catch (err) {
    done(badParameter('body', `not valid JSON (${(err as Error).message})`));
  }
}

/** The first input field holding U+0000 (PostgreSQL text cannot hold it), searched depth-first. */
export function fieldWithNul(value: unknown, name: string, depth = 0): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? name : undefined;
  if (depth > MAX_JSON_DEPTH || value === null || typeof value !== 'object') return undefined;
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const found = fieldWithNul(v, Array.isArray(value) ? name : name ? `${name}.${k}` : k, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** Refuses any path parameter, query parameter or body string holding a NUL byte, naming it. */
export async function refuseNulBytes(req: FastifyRequest): Promise<void> {
  const field = fieldWithNul(req.params, '') ?? fieldWithNul(req.query, '') ?? fieldWithNul(req.body, '');
  if (field) throw badParameter(field || 'path', 'must not contain a NUL byte (U+0000)');
}

/** A route pattern (`/v1/prices/:market/history`) as a matcher of concrete paths. */
function patternMatcher(url: string): RegExp {
  const body = url
    .split('/')
    .map((seg) => (seg === '*' ? '.*' : seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${body}/?$`);
}

/**
 * Every route's methods, collected as routes are added (call before any route). `allowFor(path)`
 * is the methods of every route whose pattern matches the concrete path (the union: a static
 * route and a parametric one may both match, the router preferring the static one), or undefined
 * when no route matches. The not-found handler answers a known path with a wrong method — any
 * method, TRACE and methods the router does not know included — with 405 and this `Allow`.
 */
export function routeMethods(app: FastifyInstance): { allowFor: (path: string) => string | undefined } {
  const routes = new Map<string, { match: RegExp; methods: Set<string> }>();
  app.addHook('onRoute', (route) => {
    const r = routes.get(route.url) ?? { match: patternMatcher(route.url), methods: new Set<string>() };
    for (const m of [route.method].flat()) r.methods.add(m);
    routes.set(route.url, r);
  });
  return {
    allowFor(path) {
      const methods = new Set<string>();
      for (const r of routes.values()) if (r.match.test(path)) for (const m of r.methods) methods.add(m);
      return methods.size > 0 ? [...methods].sort().join(', ') : undefined;
    },
  };
}

/**
 * Node hands CONNECT to a `connect` listener and, with none, closes the socket without a word.
 * We are no proxy: 405 in our shape, with the path's methods when it is one of ours.
 */
export function refuseConnect(server: Server, allowFor: (path: string) => string | undefined): void {
  server.on('connect', (req: { url?: string }, socket: Socket) => {
    const allow = allowFor((req.url ?? '').split('?')[0] ?? '') ?? 'GET, HEAD';
    const e = new ApiError(405, 'method_not_allowed', `CONNECT is not allowed here; allowed: ${allow}`);
    socket.end(rawErrorResponse(e).replace('\r\n\r\n', `\r\nallow: ${allow}\r\n\r\n`));
  });
}
