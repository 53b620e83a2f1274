/**
 * The read API's contract, checked from outside (issue 14). Every operation of the OpenAPI document
 * the server serves is asked, on every marketplace its path parameters enumerate, with the key its
 * plan needs, and with each error the document lists that a client can cause; every answer is
 * checked against that document. The schemas are applied by openapi-backend's validator (Ajv with
 * the JSON Schema 2020-12 dialect OpenAPI 3.1 uses), not by code of ours, so a mistake shared by
 * the server's schemas and a checker of our own cannot hide. Requests are generated from the
 * document: an operation added there is asked without editing this file. `plantedDrift` proves
 * the check fails when document and answer part.
 */
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { OpenAPIValidator, SetMatchType } from 'openapi-backend';

// ajv-formats is CommonJS with its function as the module's default export.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

// ---- the document ---------------------------------------------------------------------------------

interface Schema {
  type?: string | string[];
  enum?: unknown[];
  default?: unknown;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
}
interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required?: boolean;
  schema?: Schema;
}
interface ResponseObject {
  description?: string;
  content?: Record<string, { schema?: Schema }>;
}
interface OperationObject {
  operationId?: string;
  description?: string;
  'x-plan'?: string;
  security?: unknown[];
  parameters?: Parameter[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, ResponseObject>;
}
interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, OperationObject>>;
}

/** One operation: `id` is "GET /v1/prices/{market}", as plans and ACLs name endpoints. */
interface Operation {
  id: string;
  method: string;
  path: string;
  spec: OperationObject;
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

function operations(doc: OpenApiDocument): Operation[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, spec]) => ({ id: `${method.toUpperCase()} ${path}`, method: method.toUpperCase(), path, spec })),
  );
}

async function fetchDocument(origin: string): Promise<OpenApiDocument> {
  const res = await fetch(`${origin}/openapi.json`);
  if (res.status !== 200) throw new Error(`GET /openapi.json answered ${res.status}`);
  return (await res.json()) as OpenApiDocument;
}

/** The documented response for a status: exact, then its class ("4XX"), then "default" (OpenAPI 3.1 §4.8.16). */
function documentedResponse(op: Operation, status: number): ResponseObject | undefined {
  const responses = op.spec.responses ?? {};
  return responses[String(status)] ?? responses[`${Math.floor(status / 100)}XX`] ?? responses.default;
}

const mediaType = (header: string | string[] | undefined) =>
  String(header ?? '')
    .split(';')[0]!
    .trim()
    .toLowerCase();

// ---- validation -------------------------------------------------------------------------------------

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  /** Empty for media types checked by status and type only (streams, archives). */
  body: Buffer;
}

/**
 * OpenAPI 3.1 schemas are JSON Schema 2020-12. openapi-backend compiles with Ajv's draft-07 class
 * unless told otherwise, which would ignore 2020-12 keywords (prefixItems, $defs,
 * unevaluatedProperties) should the document come to use them; and formats (date-time, date) are
 * only checked with ajv-formats.
 */
function draft2020(_original: unknown, options: object): Ajv2020 {
  return addFormats(new Ajv2020({ ...options, strict: false, allErrors: true }));
}

/** openapi-backend finds operations by operationId; the served document has none, so each gets its id. */
function withOperationIds(doc: OpenApiDocument): OpenApiDocument {
  const copy = structuredClone(doc);
  for (const op of operations(copy)) op.spec.operationId ??= op.id;
  return copy;
}

type Definition = ConstructorParameters<typeof OpenAPIValidator>[0]['definition'];

const formatError = (e: { instancePath: string; message?: string; params?: unknown }) =>
  `${e.instancePath || '/'} ${e.message ?? 'invalid'} ${JSON.stringify(e.params ?? {})}`;

class ContractValidator {
  private readonly lib: OpenAPIValidator;
  readonly ops: Operation[];

  constructor(readonly doc: OpenApiDocument) {
    const definition = withOperationIds(doc);
    this.ops = operations(definition);
    this.lib = new OpenAPIValidator({
      definition: definition as unknown as Definition,
      lazyCompileValidators: true,
      customizeAjv: draft2020 as never,
    });
  }

  /** What is wrong with `answer` as an answer of `op`: nothing, or one line per violation. */
  check(asked: Operation, answer: Answer): string[] {
    // This document's own operation: a drifted copy differs from the one the probe was made from.
    const op = this.ops.find((o) => o.id === asked.id) ?? asked;
    const framing = framingErrors(op, answer);
    if (framing !== undefined) return framing;
    let body: unknown;
    try {
      body = JSON.parse(answer.body.toString('utf8'));
    } catch {
      return [`body is not JSON: ${answer.body.toString('utf8').slice(0, 200)}`];
    }
    const res = this.lib.validateResponse(body, op.id, answer.status);
    const headers = this.lib.validateResponseHeaders(answer.headers, op.id, {
      statusCode: answer.status,
      setMatchType: SetMatchType.Superset,
    });
    return [...(res.errors ?? []), ...(headers.errors ?? [])].map(formatError);
  }
}

/**
 * What openapi-backend does not look at: whether the status is documented at all (it passes an
 * answer it has no schema for), and the media type. Undefined when the body is JSON left to check.
 */
function framingErrors(op: Operation, answer: Answer): string[] | undefined {
  const response = documentedResponse(op, answer.status);
  if (!response) return [`status ${answer.status} is not documented`];
  const content = response.content ?? {};
  const media = mediaType(answer.headers['content-type']);
  if (Object.keys(content).length === 0)
    return answer.body.length > 0 ? [`documented without a body, answered ${answer.body.length} bytes`] : [];
  if (!(media in content))
    return [`content-type '${media}' is not among the documented ${Object.keys(content).join(', ')}`];
  return media === 'application/json' ? undefined : [];
}

// ---- requests generated from the document ----------------------------------------------------------

interface ContractKeys {
  basic: string;
  pro: string;
  enterprise: string;
  disabled: string;
  expired: string;
  /** A key whose endpoint ACL allows only `allows` (403 endpoint_not_allowed elsewhere). */
  acl?: { key: string; allows: readonly string[] };
}

export interface ContractOptions {
  keys: ContractKeys;
  /** Values of parameters and body properties the document cannot invent (a real item's name). */
  samples: Record<string, unknown>;
  /** Query values that make a documented status the document cannot say how to cause (410: an expired cursor). */
  provoke?: Record<number, Record<string, string>>;
  /** The operation whose real answer the planted drifts are tried on. */
  drift: string;
  /** Only the operations whose id passes (a test of one group of endpoints). @default every operation */
  only?: (id: string) => boolean;
}

interface Inputs {
  path: Record<string, string>;
  query: Record<string, string>;
  body?: unknown;
}

interface HttpRequest {
  method: string;
  target: string;
  headers: Record<string, string>;
  body?: string;
}

/** One request and what it is meant to make the server answer. */
interface Probe {
  /** The operations the answer belongs to (a wrong method on a path: each of the path's). */
  ops: Operation[];
  what: string;
  expect: number | '2XX';
  request: HttpRequest;
  key?: string;
  /** conditional: asked again with the ETag of its first answer; burst: after the key's second is used up. */
  mode?: 'conditional' | 'burst';
}

const PLANS = ['basic', 'pro', 'enterprise'] as const;
type Plan = (typeof PLANS)[number];
const isPlan = (p: unknown): p is Plan => PLANS.includes(p as Plan);

/**
 * The plan a request needs: the description's "Plan: pro; cn-a: enterprise." names marketplaces
 * that raise it (x-plan carries the endpoint's own plan only).
 */
function planOf(op: Operation, inputs: Inputs): Plan {
  const m = /^Plan: (\w+)(?:; ([^.]*))?\./.exec(op.spec.description ?? '');
  for (const part of m?.[2]?.split(', ') ?? []) {
    const [slug, plan] = part.split(': ');
    if (isPlan(plan) && Object.values(inputs.path).includes(slug ?? '')) return plan;
  }
  const plan = m?.[1] ?? op.spec['x-plan'];
  return isPlan(plan) ? plan : 'basic';
}

const paramsOf = (op: Operation, where: Parameter['in']) => (op.spec.parameters ?? []).filter((p) => p.in === where);

/** The document's own value of a parameter where it has one: a sample, its default, its first enum value. */
function valueOf(p: Parameter, samples: Record<string, unknown>): string | undefined {
  const v = samples[p.name] ?? p.schema?.default ?? p.schema?.enum?.[0];
  return v === undefined ? undefined : String(v);
}

/** A JSON body with the required properties of the operation's body schema, from the samples. */
function bodyOf(op: Operation, samples: Record<string, unknown>): unknown {
  const schema = op.spec.requestBody?.content?.['application/json']?.schema;
  if (!schema) return undefined;
  return Object.fromEntries((schema.required ?? []).map((name) => [name, samples[name]]));
}

/** The smallest valid request: path parameters and required query parameters; or what is missing. */
function baseInputs(op: Operation, samples: Record<string, unknown>): Inputs | string {
  const inputs: Inputs = { path: {}, query: {}, body: bodyOf(op, samples) };
  for (const p of op.spec.parameters ?? []) {
    if (p.in !== 'path' && !p.required) continue;
    const v = valueOf(p, samples);
    if (v === undefined) return `no sample for the required ${p.in} parameter '${p.name}'`;
    if (p.in === 'path') inputs.path[p.name] = v;
    else if (p.in === 'query') inputs.query[p.name] = v;
  }
  const missing = Object.entries((inputs.body ?? {}) as Record<string, unknown>).find(([, v]) => v === undefined);
  return missing ? `no sample for the body property '${missing[0]}'` : inputs;
}

/**
 * Every valid request worth asking: each enumerated value of each path parameter (the
 * marketplaces), and each optional query parameter with an enumerated or sampled value.
 */
function variants(op: Operation, base: Inputs, samples: Record<string, unknown>): Inputs[] {
  const out = [base];
  for (const p of paramsOf(op, 'path'))
    for (const v of p.schema?.enum ?? [])
      if (String(v) !== base.path[p.name]) out.push({ ...base, path: { ...base.path, [p.name]: String(v) } });
  for (const p of paramsOf(op, 'query').filter((q) => !q.required)) {
    const values = p.schema?.enum ?? (samples[p.name] === undefined ? [] : [samples[p.name]]);
    for (const v of values) out.push({ ...base, query: { ...base.query, [p.name]: String(v) } });
  }
  return out;
}

function target(op: Operation, inputs: Inputs): string {
  const path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(inputs.path[name] ?? ''));
  const query = new URLSearchParams(inputs.query).toString();
  return query ? `${path}?${query}` : path;
}

/** Both documented key schemes are used: x-api-key, and Authorization: Bearer on every other request. */
function request(op: Operation, inputs: Inputs, key: string | undefined, bearer = false): HttpRequest {
  const headers: Record<string, string> = {};
  if (key) headers[bearer ? 'authorization' : 'x-api-key'] = bearer ? `Bearer ${key}` : key;
  if (inputs.body === undefined) return { method: op.method, target: target(op, inputs), headers };
  headers['content-type'] = 'application/json';
  return { method: op.method, target: target(op, inputs), headers, body: JSON.stringify(inputs.body) };
}

const documents = (op: Operation, status: number) => String(status) in (op.spec.responses ?? {});
const isPublic = (op: Operation) => Array.isArray(op.spec.security) && op.spec.security.length === 0;

/** A value the parameter's schema refuses, where the schema says enough to make one. */
function badValue(schema: Schema | undefined): string | undefined {
  if (!schema) return undefined;
  if (schema.enum) return 'zz-not-documented';
  if (schema.type === 'integer' || schema.type === 'number') return 'not-a-number';
  if (schema.pattern && !new RegExp(schema.pattern, 'u').test(' ')) return ' ';
  if (schema.maxLength !== undefined) return 'x'.repeat(schema.maxLength + 1);
  return undefined;
}

/**
 * A bad request: a query parameter with a value its schema refuses; else a body without its
 * required properties; else a NUL byte in a query parameter (documented: "NUL bytes").
 */
function badRequest(op: Operation, base: Inputs): Inputs {
  const query = paramsOf(op, 'query');
  const refused = query.find((p) => badValue(p.schema) !== undefined);
  if (refused) return { ...base, query: { ...base.query, [refused.name]: badValue(refused.schema)! } };
  if (base.body !== undefined) return { ...base, body: {} };
  return { ...base, query: { ...base.query, [query[0]?.name ?? '_']: '\u0000' } };
}

/** The refused-key cases, one per operation in turn: every kind is asked, none trips the per-address guard. */
const UNAUTHORISED = ['none', 'disabled', 'expired', 'invalid'] as const;

function unauthorised(op: Operation, base: Inputs, keys: ContractKeys, turn: number): Probe {
  const kind = UNAUTHORISED[turn % UNAUTHORISED.length]!;
  const key = { none: undefined, disabled: keys.disabled, expired: keys.expired, invalid: 'sp_0000000000_invalid' }[
    kind
  ];
  return { ops: [op], what: `401: key ${kind}`, expect: 401, request: request(op, base, key) };
}

/** 403: a plan below the operation's, or, for basic operations, a key whose ACL leaves it out. */
function forbidden(op: Operation, base: Inputs, keys: ContractKeys): Probe | undefined {
  const key =
    planOf(op, base) !== 'basic' ? keys.basic : keys.acl && !keys.acl.allows.includes(op.id) ? keys.acl.key : undefined;
  return key ? { ops: [op], what: '403: plan or ACL', expect: 403, request: request(op, base, key), key } : undefined;
}

const UNKNOWN_ITEM = 'Contract Check | No Such Item (Factory New)';

/** 404: an unknown value of each path parameter (a marketplace); an unknown item where the 404 says so. */
function notFound(op: Operation, base: Inputs, key: string): Probe[] {
  const probes = paramsOf(op, 'path').map<Probe>((p) => ({
    ops: [op],
    what: `404: unknown ${p.name}`,
    expect: 404,
    request: request(op, { ...base, path: { ...base.path, [p.name]: 'zz-unknown' } }, key),
    key,
  }));
  const itemParam = paramsOf(op, 'query').find((p) => p.required && p.name === 'market_hash_name');
  if (itemParam && /\bitem\b/.test(op.spec.responses?.['404']?.description ?? ''))
    probes.push({
      ops: [op],
      what: '404: unknown item',
      expect: 404,
      request: request(op, { ...base, query: { ...base.query, [itemParam.name]: UNKNOWN_ITEM } }, key),
      key,
    });
  return probes;
}

/** 414: a path parameter over the router's 100 characters (only parametric segments are limited). */
function uriTooLong(op: Operation, base: Inputs, key: string): Probe[] {
  const p = paramsOf(op, 'path')[0];
  if (!p) return [];
  const inputs = { ...base, path: { ...base.path, [p.name]: 'a'.repeat(101) } };
  return [{ ops: [op], what: '414: long path segment', expect: 414, request: request(op, inputs, key), key }];
}

/** 415 and 413 where the operation takes a body: the right JSON as text/plain, and JSON over 64 KiB. */
function bodyErrors(op: Operation, base: Inputs, key: string): Probe[] {
  if (base.body === undefined) return [];
  const plain = request(op, base, key);
  plain.headers['content-type'] = 'text/plain';
  const large = request(op, { ...base, body: { ...(base.body as object), pad: 'x'.repeat(70_000) } }, key);
  return [
    { ops: [op], what: '415: text/plain body', expect: 415, request: plain, key },
    { ops: [op], what: '413: body over 64 KiB', expect: 413, request: large, key },
  ];
}

/** 417 and 431: what Node's parser refuses before any route, answered in the documented shape. */
function edgeErrors(op: Operation, base: Inputs, key: string): Probe[] {
  const expect = request(op, base, key);
  expect.headers.expect = 'contract-check';
  const huge = request(op, base, key);
  huge.headers['x-padding'] = 'x'.repeat(17 * 1024);
  return [
    { ops: [op], what: '417: Expect other than 100-continue', expect: 417, request: expect, key },
    { ops: [op], what: '431: headers over 16 KiB', expect: 431, request: huge, key },
  ];
}

/** Statuses caused by inputs the caller knows (410: an expired cursor), where the operation takes them. */
function provoked(op: Operation, base: Inputs, key: string, provoke: ContractOptions['provoke']): Probe[] {
  const names = new Set(paramsOf(op, 'query').map((p) => p.name));
  return Object.entries(provoke ?? {})
    .filter(([status, query]) => documents(op, Number(status)) && Object.keys(query).every((n) => names.has(n)))
    .map(([status, query]) => ({
      ops: [op],
      what: `${status}: ${new URLSearchParams(query).toString()}`,
      expect: Number(status),
      request: request(op, { ...base, query: { ...base.query, ...query } }, key),
      key,
    }));
}

/** The keyed error cases of one operation, from its smallest valid request. */
function keyedErrors(op: Operation, base: Inputs, o: ContractOptions, turn: number): Probe[] {
  const key = o.keys[planOf(op, base)];
  const enterprise = o.keys.enterprise;
  const probes: Probe[] = [
    unauthorised(op, base, o.keys, turn),
    ...[forbidden(op, base, o.keys)].filter((p): p is Probe => p !== undefined),
    {
      ops: [op],
      what: '429: per-second limit',
      expect: 429,
      request: request(op, base, enterprise),
      key: enterprise,
      mode: 'burst',
    },
  ];
  return documents(op, 304) ? [...probes, conditional(op, base, key)] : probes;
}

function conditional(op: Operation, base: Inputs, key: string): Probe {
  return {
    ops: [op],
    what: '304: If-None-Match',
    expect: 304,
    request: request(op, base, key),
    key,
    mode: 'conditional',
  };
}

/** Every probe of one operation, or why it cannot be asked at all. */
function planOperation(op: Operation, o: ContractOptions, turn: number): Probe[] | string {
  const base = baseInputs(op, o.samples);
  if (typeof base === 'string') return base;
  const valid = variants(op, base, o.samples).map<Probe>((inputs, i) => {
    const key = isPublic(op) ? undefined : o.keys[planOf(op, inputs)];
    return {
      ops: [op],
      what: `2XX: ${target(op, inputs)}`,
      expect: '2XX',
      request: request(op, inputs, key, i % 2 === 1),
      key,
    };
  });
  const key = o.keys[planOf(op, base)];
  return [
    ...valid,
    { ops: [op], what: '400: bad parameter', expect: 400, request: request(op, badRequest(op, base), key), key },
    ...notFound(op, base, key),
    ...uriTooLong(op, base, key),
    ...bodyErrors(op, base, key),
    ...edgeErrors(op, base, key),
    ...provoked(op, base, key, o.provoke),
    ...(isPublic(op) ? [] : keyedErrors(op, base, o, turn)),
  ];
}

/** 405: a method the document does not list on a path; the answer belongs to each of the path's operations. */
function wrongMethods(ops: Operation[], samples: Record<string, unknown>): Probe[] {
  const byPath = new Map<string, Operation[]>();
  for (const op of ops) byPath.set(op.path, [...(byPath.get(op.path) ?? []), op]);
  return [...byPath.values()].flatMap((pathOps) => {
    const listed = new Set(pathOps.map((op) => op.method));
    const method = ['DELETE', 'PUT', 'PATCH'].find((m) => !listed.has(m));
    const base = baseInputs(pathOps[0]!, samples);
    if (!method || typeof base === 'string') return [];
    return [
      {
        ops: pathOps,
        what: `405: ${method}`,
        expect: 405,
        request: { method, target: target(pathOps[0]!, base), headers: {} },
      },
    ];
  });
}

// ---- asking ------------------------------------------------------------------------------------------

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One request on a connection of its own (the server closes some, after 417 and 431). Streams and
 * archives are checked by status and type only, so their bodies are not read: a stream never ends.
 */
function send(origin: string, r: HttpRequest, agent?: Agent): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      new URL(r.target, origin),
      { method: r.method, headers: r.headers, agent: agent ?? false },
      (res) => {
        const answer = (body: Buffer) => resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        const media = mediaType(res.headers['content-type']);
        if (media && media !== 'application/json') {
          res.destroy();
          return answer(Buffer.alloc(0));
        }
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => answer(Buffer.concat(chunks)));
        res.on('error', reject);
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error(`${r.method} ${r.target}: no answer in 30 s`)));
    req.on('error', reject);
    req.end(r.body);
  });
}

/** Keeps each key under the per-second limit (10), so a probe meets the rate limiter only where it means to. */
class Pacer {
  private readonly sent = new Map<string, number[]>();

  async wait(key: string | undefined): Promise<void> {
    if (!key) return;
    for (;;) {
      const now = Date.now();
      const recent = (this.sent.get(key) ?? []).filter((t) => now - t < 1_100);
      this.sent.set(key, recent);
      if (recent.length < 7) {
        recent.push(now);
        return;
      }
      await sleep(1_100 - (now - recent[0]!));
    }
  }

  /** After a burst the key's second is used up: nothing more until it has passed. */
  exhaust(key: string): void {
    this.sent.set(
      key,
      Array.from({ length: 7 }, () => Date.now()),
    );
  }
}

interface Violation {
  method: string;
  path: string;
  status: number;
  request: string;
  errors: string[];
}

interface Unexercised {
  method: string;
  path: string;
  status: string;
  reason: string;
}

const matches = (expect: Probe['expect'], status: number) =>
  expect === '2XX' ? status >= 200 && status < 300 : status === expect;

/** A request that got no answer (a refused or reset connection) is a miss, shown as status 0, not a crash. */
const failed = (err: Error): Answer => ({ status: 0, headers: {}, body: Buffer.from(`no answer: ${err.message}`) });

const snippet = (a: Answer) => `${a.status} ${a.body.toString('utf8').slice(0, 160)}`;

/** Asks probes and checks every answer; a probe whose (last) answer is not the status it meant is a miss. */
class Session {
  readonly violations: Violation[] = [];
  readonly misses: Unexercised[] = [];
  /** The first clean 2XX JSON answer of each operation (for the planted drifts). */
  readonly clean = new Map<string, Answer>();
  answers = 0;
  private readonly pacer = new Pacer();

  constructor(
    private readonly origin: string,
    private readonly validator: ContractValidator,
    private readonly burner?: Probe,
  ) {}

  private record(probe: Probe, a: Answer, final = true): void {
    this.answers++;
    for (const op of probe.ops) {
      const errors = a.status === 0 ? [] : this.validator.check(op, a);
      if (errors.length > 0)
        this.violations.push({ method: op.method, path: op.path, status: a.status, request: probe.what, errors });
      else if (a.status < 300 && a.body.length > 0 && !this.clean.has(op.id)) this.clean.set(op.id, a);
      if (final && !matches(probe.expect, a.status))
        this.misses.push({
          method: op.method,
          path: op.path,
          status: String(probe.expect),
          reason: `${probe.what} (${probe.request.target.slice(0, 120)}) answered ${snippet(a)}`,
        });
    }
  }

  /**
   * One exchange. A 429 or 503 the probe did not ask for is what the document tells clients to
   * wait out (Retry-After): waited out and asked again, a few times (the sales export is built
   * only some time after the platform starts).
   */
  private async exchange(probe: Probe, r = probe.request, final = true, agent?: Agent): Promise<Answer> {
    for (let attempt = 0; ; attempt++) {
      await this.pacer.wait(probe.key);
      const a = await send(this.origin, r, agent).catch((err: Error) => failed(err));
      const retry = (a.status === 429 || a.status === 503) && probe.expect !== a.status && attempt < 3;
      this.record(probe, a, final && !retry);
      if (!retry) return a;
      await sleep(Math.min(60, Number(a.headers['retry-after'] ?? 1)) * 1_000 + 100);
    }
  }

  async ask(probe: Probe): Promise<void> {
    if (probe.mode === 'conditional') return this.askConditional(probe);
    if (probe.mode === 'burst') return this.askBurst(probe);
    await this.exchange(probe);
  }

  /**
   * 304: the ETag of a fresh answer, sent back at once (a body rebuilt in between moves it: asked
   * again), on the same kept-alive connection, as a client revalidates: the API's workers build
   * their bodies apart, so while prices move, two of them may hold different versions.
   */
  private async askConditional(probe: Probe): Promise<void> {
    const first = { ...probe, what: `${probe.what} (first answer)`, expect: '2XX' as const };
    for (let attempt = 0; attempt < 4; attempt++) {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const etag = (await this.exchange(first, first.request, true, agent)).headers.etag;
        const r = { ...probe.request, headers: { ...probe.request.headers, 'if-none-match': etag ?? '"none"' } };
        if ((await this.exchange(probe, r, attempt === 3, agent)).status === 304) return;
      } finally {
        agent.destroy();
      }
    }
  }

  /**
   * 429: twelve requests of the cheapest operation with the same key at the start of a second,
   * then the probe within it. The limiter's windows are whole seconds, so starting at one keeps
   * the burst and the probe in one window.
   */
  private async askBurst(probe: Probe): Promise<void> {
    const burner = this.burner;
    if (!burner) {
      const op = probe.ops[0]!;
      this.misses.push({
        method: op.method,
        path: op.path,
        status: '429',
        reason: 'no operation to use up a second with',
      });
      return;
    }
    for (let attempt = 0; attempt < 4; attempt++) {
      await sleep(1_000 - (Date.now() % 1_000) + 5);
      const burst = Array.from({ length: 12 }, () => send(this.origin, burner.request).catch(failed));
      await sleep(50);
      const a = await send(this.origin, probe.request).catch(failed);
      for (const b of await Promise.all(burst)) this.record({ ...burner, expect: b.status }, b);
      this.record(probe, a, attempt === 3 || a.status === 429);
      this.pacer.exhaust(burner.key!);
      if (a.status === 429) return;
    }
  }
}

/** The cheapest operation to use up a key's second with: a GET without parameters answering JSON. */
function burnerOf(ops: Operation[], keys: ContractKeys): Probe | undefined {
  const op = ops.find(
    (o) =>
      o.method === 'GET' &&
      !isPublic(o) &&
      (o.spec.parameters ?? []).length === 0 &&
      o.spec.responses?.['200']?.content?.['application/json'] !== undefined,
  );
  if (!op) return undefined;
  const r = request(op, { path: {}, query: {} }, keys.enterprise);
  return { ops: [op], what: '429 burst', expect: '2XX', request: r, key: keys.enterprise };
}

// ---- the check -----------------------------------------------------------------------------------------

export interface ContractReport {
  /** Answers checked. */
  answers: number;
  probes: number;
  violations: Violation[];
  /** Operations not asked at all, and documented statuses a probe was meant to cause but did not. */
  unexercised: Unexercised[];
  /** Documented statuses no probe tries to cause (408, 500, 503 …), per operation. */
  notProvoked: string[];
  drift: { document: string[]; answer: string[]; cleanBefore: string[] };
}

function planAll(ops: Operation[], o: ContractOptions): { probes: Probe[]; unexercised: Unexercised[] } {
  const probes: Probe[] = [];
  const unexercised: Unexercised[] = [];
  ops.forEach((op, turn) => {
    const planned = planOperation(op, o, turn);
    if (typeof planned === 'string')
      unexercised.push({ method: op.method, path: op.path, status: '*', reason: planned });
    else probes.push(...planned);
  });
  return { probes: [...probes, ...wrongMethods(ops, o.samples)], unexercised };
}

function notProvoked(ops: Operation[], probes: Probe[]): string[] {
  const planned = new Set(probes.flatMap((p) => p.ops.map((op) => `${op.id} ${p.expect}`)));
  return ops
    .map((op) => {
      const left = Object.keys(op.spec.responses ?? {}).filter(
        (s) => !planned.has(`${op.id} ${s}`) && !(s.startsWith('2') && planned.has(`${op.id} 2XX`)),
      );
      return left.length ? `${op.id}: ${left.join(', ')}` : '';
    })
    .filter(Boolean);
}

/** Asks every probe generated from the served document and checks every answer against it. */
export async function checkContract(origin: string, o: ContractOptions): Promise<ContractReport> {
  const validator = new ContractValidator(await fetchDocument(origin));
  const ops = validator.ops.filter((op) => o.only?.(op.id) ?? true);
  const { probes, unexercised } = planAll(ops, o);
  const session = new Session(origin, validator, burnerOf(ops, o.keys));
  for (const probe of probes) await session.ask(probe);
  const op = validator.ops.find((x) => x.id === o.drift);
  const sample = session.clean.get(o.drift);
  if (!op || !sample) throw new Error(`no clean 2XX answer of ${o.drift} to plant the drifts on`);
  return {
    answers: session.answers,
    probes: probes.length,
    violations: session.violations,
    unexercised: [...unexercised, ...session.misses],
    notProvoked: notProvoked(ops, probes),
    drift: { ...plantedDrift(validator.doc, op, sample), cleanBefore: validator.check(op, sample) },
  };
}

// ---- planted drift: proof that the check can fail ------------------------------------------------------

/** The object schemas an array's items may take (each alternative of a union). */
const rowShapes = (items: Schema): Schema[] =>
  [items, ...(items.anyOf ?? []), ...(items.oneOf ?? [])].filter((s) => s.properties && s.required?.length);

/** Renames the first required property of every row shape (array items) in `schema`; the names renamed. */
function renameRowProperty(schema: Schema): string[] {
  const renamed: string[] = [];
  if (schema.items)
    for (const row of rowShapes(schema.items)) {
      const name = row.required![0]!;
      row.properties![`${name}_renamed`] = row.properties![name]!;
      delete row.properties![name];
      row.required = row.required!.map((r) => (r === name ? `${name}_renamed` : r));
      renamed.push(name);
    }
  for (const child of [...Object.values(schema.properties ?? {}), ...(schema.anyOf ?? []), ...(schema.oneOf ?? [])])
    renamed.push(...renameRowProperty(child));
  return renamed;
}

/** Adds a property the document does not have to the first row of the body (or to the body itself). */
function addExtraProperty(body: unknown): void {
  const rows = Object.values(body as Record<string, unknown>).find(
    (v): v is Record<string, unknown>[] => Array.isArray(v) && typeof v[0] === 'object' && v[0] !== null,
  );
  (rows?.[0] ?? (body as Record<string, unknown>)).contract_check_extra = true;
}

/**
 * The check must fail when the two part: a real answer of `op` against a copy of the document
 * whose row schema lost a required property (renamed), and the same answer with a property the
 * document does not have against the served document.
 */
function plantedDrift(doc: OpenApiDocument, op: Operation, answer: Answer): { document: string[]; answer: string[] } {
  const drifted = structuredClone(doc);
  const ok = Object.entries(drifted.paths[op.path]?.[op.method.toLowerCase()]?.responses ?? {}).find(([s]) =>
    s.startsWith('2'),
  )?.[1];
  const schema = ok?.content?.['application/json']?.schema;
  if (!schema || renameRowProperty(schema).length === 0) throw new Error(`${op.id}: no row schema to plant a drift in`);
  const body = JSON.parse(answer.body.toString('utf8')) as unknown;
  addExtraProperty(body);
  const widened = { ...answer, body: Buffer.from(JSON.stringify(body)) };
  return {
    document: new ContractValidator(drifted).check(op, answer),
    answer: new ContractValidator(doc).check(op, widened),
  };
}
