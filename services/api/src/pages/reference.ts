/**
 * GET /docs: the interactive API reference, without a key. Swagger UI (swagger-ui-dist, the
 * OpenAPI initiative's reference UI, maintained by SmartBear) renders /openapi.json, lets a customer
 * paste a key into "Authorize" (x-api-key or Bearer, as the document declares) and "Try it out"
 * on every operation. Chosen over Redoc, which has no try-it-out, and over Scalar, whose standalone
 * bundle loads fonts from its CDN unless configured not to and changes weekly: Swagger UI's two
 * files are plain scripts and styles that need no build step and make no request of their own once
 * the validator badge is off (validatorUrl: null, below).
 *
 * Every asset is served from node_modules by us (no CDN: customers behind strict egress rules,
 * and no third party learns who reads our docs): an allow-list of files, read once on first use,
 * kept with their gzip form, `ETag`, and a year's `immutable` caching for URLs that carry the
 * installed version (the page links them so; an upgrade changes the URLs). The page's CSP allows
 * scripts, styles and connections to this origin only, so nothing it runs can send the pasted key
 * elsewhere. The key lives in the page's memory only (persistAuthorization: false): a reload
 * forgets it, nothing is written to localStorage.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';
import { docsPage } from '../openapi.js';
import { html } from './html.js';

const require = createRequire(import.meta.url);
// Not the package's index.js: that would load the 1.7 MB browser bundle into this process.
const absolutePath = require('swagger-ui-dist/absolute-path.js') as () => string;
/** The installed swagger-ui-dist version (in every asset URL, so an upgrade is a new URL). */
export const SWAGGER_UI_VERSION = (require('swagger-ui-dist/package.json') as { version: string }).version;

/** Swagger UI's configuration: our document, our origin, no validator badge (a request to swagger.io). */
const REFERENCE_SCRIPT = `'use strict';
// Served by the API (services/api/src/pages/reference.ts).
window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  validatorUrl: null,
  queryConfigEnabled: false,
  persistAuthorization: false,
  displayRequestDuration: true,
  defaultModelsExpandDepth: -1,
  presets: [SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
});
`;

interface Asset {
  type: string;
  /** From swagger-ui-dist (a file name) or our own text. */
  source: { file: string } | { text: string };
}

/** The files /docs/assets/ serves; anything else is a 404 (no path ever reaches the file system). */
const ASSETS: Readonly<Record<string, Asset>> = {
  'swagger-ui-bundle.js': { type: 'text/javascript; charset=utf-8', source: { file: 'swagger-ui-bundle.js' } },
  'swagger-ui.css': { type: 'text/css; charset=utf-8', source: { file: 'swagger-ui.css' } },
  'favicon-32x32.png': { type: 'image/png', source: { file: 'favicon-32x32.png' } },
  'favicon-16x16.png': { type: 'image/png', source: { file: 'favicon-16x16.png' } },
  'reference.js': { type: 'text/javascript; charset=utf-8', source: { text: REFERENCE_SCRIPT } },
};

interface Loaded {
  type: string;
  body: Buffer;
  /** Only for text: PNGs are compressed already. */
  gzip: Buffer | undefined;
  etag: string;
}

async function load(asset: Asset): Promise<Loaded> {
  const body =
    'file' in asset.source ? await readFile(join(absolutePath(), asset.source.file)) : Buffer.from(asset.source.text);
  const text = asset.type.startsWith('text/');
  return {
    type: asset.type,
    body,
    gzip: text ? gzipSync(body) : undefined,
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
  };
}

const IMMUTABLE = 'public, max-age=31536000, immutable';
/** An asset URL without the current version (an old page, a hand-typed URL) is revalidated soon. */
const UNVERSIONED = 'public, max-age=300';

/** Scripts, styles, images and requests from this origin only; Swagger UI sets inline styles. */
const REFERENCE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
  "font-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const asset = (name: string) => `/docs/assets/${name}?v=${SWAGGER_UI_VERSION}`;
/** The icon of every page (the status page links it too). */
export const FAVICON_URL = asset('favicon-32x32.png');

function referencePage(): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>Price data service: API reference</title>
        <link rel="icon" type="image/png" href="${FAVICON_URL}" />
        <link rel="stylesheet" href="${asset('swagger-ui.css')}" />
        <style>
          body {
            margin: 0;
            background: #fafafa;
            font-family: system-ui, sans-serif;
          }
          .intro {
            max-width: 1460px;
            margin: 0 auto;
            padding: 1rem 20px 0;
          }
          .intro p {
            margin: 0.4rem 0;
          }
        </style>
      </head>
      <body>
        <header class="intro">
          <h1>Game-item price data service</h1>
          <p>
            Paste your key under <b>Authorize</b> (as <code>x-api-key</code>, or as a Bearer token), then open an
            operation and use <b>Try it out</b>. The key stays in this page's memory: a reload forgets it.
          </p>
          <p>
            Prices are decimal strings in each marketplace's currency. 10 requests per second per key, plus per-minute
            and per-day limits (429 with <code>Retry-After</code>). Errors:
            <code>{"error":{"status":403,"code":"plan_required","message":"…"}}</code>. Machine-readable:
            <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1). Without JavaScript:
            <a href="/docs/plain">/docs/plain</a>. Freshness at a glance: <a href="/status">/status</a>.
          </p>
        </header>
        <div id="swagger-ui"></div>
        <noscript
          ><p class="intro">
            This reference needs JavaScript; <a href="/docs/plain">/docs/plain</a> lists every endpoint without it.
          </p></noscript
        >
        <script src="${asset('swagger-ui-bundle.js')}"></script>
        <script src="${asset('reference.js')}"></script>
      </body>
    </html>`.text;
}

/** GET /docs (the interactive reference), /docs/assets/{file} and /docs/plain (the static table); no key. */
export function registerReference(app: FastifyInstance): void {
  const loaded = new Map<string, Promise<Loaded>>();
  const page = referencePage();

  // Documentation routes are not operations of the API: hidden from the document.
  const hide = { schema: { hide: true } };
  app.get('/docs', hide, async (_req, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .header('cache-control', 'no-cache')
      .header('content-security-policy', REFERENCE_CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .send(page),
  );

  app.get('/docs/plain', hide, async (_req, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .header('cache-control', 'no-cache')
      .send(docsPage(app.swagger() as Parameters<typeof docsPage>[0])),
  );

  app.get<{ Params: { file: string }; Querystring: { v?: string } }>('/docs/assets/:file', hide, async (req, reply) => {
    const name = req.params.file;
    const spec = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
    if (!spec) throw new ApiError(404, 'not_found', `no such asset: '${name.slice(0, 100)}'`);
    let p = loaded.get(name);
    if (!p) {
      p = load(spec);
      // A failed read is not cached: the next request tries again.
      void p.catch(() => loaded.delete(name));
      loaded.set(name, p);
    }
    const a = await p;
    reply
      .header('content-type', a.type)
      .header('etag', a.etag)
      .header('cache-control', req.query.v === SWAGGER_UI_VERSION ? IMMUTABLE : UNVERSIONED)
      .header('vary', 'accept-encoding')
      .header('x-content-type-options', 'nosniff');
    if (req.headers['if-none-match'] === a.etag) return reply.code(304).send();
    if (a.gzip && /\bgzip\b/.test(req.headers['accept-encoding'] ?? ''))
      return reply.header('content-encoding', 'gzip').send(a.gzip);
    return reply.send(a.body);
  });
}
