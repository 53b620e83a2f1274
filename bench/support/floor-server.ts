/**
 * The floor: what Node's own HTTP server does on this machine with answers that cost nothing to
 * make. A `node:http` server and nothing else: one Map lookup by method and URL, the request's body
 * read to its end (a POST's 100 names are read as the API reads them), then the status, the headers
 * and the prepared bytes (`res.writeHead` + `res.end`). An API that assembles prepared answers can
 * approach this and not pass it, so bench/api.ts reports the API's figures against it, beside
 * nginx's (the machine's limit, not the runtime's).
 *
 * Started by bench/support/floor.ts, compiled ahead like the API (under tsx each process would
 * compile its module with a loader thread of its own). Configured by the environment, which the
 * cluster's workers inherit:
 *   FLOOR_DIR        answers.json ({ method, url, status, headers, file }[]) and the bodies' files;
 *                    `ready` is written there once every process listens
 *   FLOOR_PORT       the port, on 127.0.0.1
 *   FLOOR_PROCESSES  1: one process; N > 1: a node:cluster primary forks N workers sharing the port,
 *                    the cluster's default scheduling, as the API's API_PROCESSES does
 */
import cluster from 'node:cluster';
import { createServer, type OutgoingHttpHeaders } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** One answer as bench/support/floor.ts writes it to answers.json. */
export interface FloorManifestEntry {
  method: string;
  /** The request's path and query, as the client sends it. */
  url: string;
  status: number;
  headers: Record<string, string>;
  /** The body's file in FLOOR_DIR. */
  file: string;
}

const dir = process.env.FLOOR_DIR as string;
const port = Number(process.env.FLOOR_PORT);
const processes = Number(process.env.FLOOR_PROCESSES ?? '1');
const markReady = () => writeFileSync(join(dir, 'ready'), `${process.pid}\n`);

interface Answer {
  status: number;
  headers: OutgoingHttpHeaders;
  body: Buffer;
}

/** Every answer by `METHOD url`, its headers complete (length and type) before the first request. */
function loadAnswers(): Map<string, Answer> {
  const manifest = JSON.parse(readFileSync(join(dir, 'answers.json'), 'utf8')) as FloorManifestEntry[];
  return new Map(
    manifest.map((e) => {
      const body = readFileSync(join(dir, e.file));
      // Content-Length given: with writeHead's headers already stored, Node would otherwise chunk the body.
      const headers = { 'Content-Type': 'application/json', ...e.headers, 'Content-Length': body.length };
      return [`${e.method} ${e.url}`, { status: e.status, headers, body }];
    }),
  );
}

/** A request the bench did not prepare an answer for: wrk counts a 404 as an error, refusing the run. */
const NOT_FOUND: Answer = {
  status: 404,
  headers: { 'Content-Type': 'text/plain', 'Content-Length': 9 },
  body: Buffer.from('not found'),
};

function serve(onListening: () => void): void {
  const answers = loadAnswers();
  const drain = () => {};
  const server = createServer((req, res) => {
    const answer = answers.get(`${req.method} ${req.url}`) ?? NOT_FOUND;
    req.on('data', drain);
    req.on('end', () => {
      res.writeHead(answer.status, answer.headers);
      res.end(answer.body);
    });
  });
  server.listen(port, '127.0.0.1', onListening);
}

if (processes > 1 && cluster.isPrimary) {
  let listening = 0;
  cluster.on('listening', () => {
    if (++listening === processes) markReady();
  });
  for (let i = 0; i < processes; i++) cluster.fork();
  // The bench stops the primary; its workers go with it (they would also exit when its IPC closes).
  process.on('SIGTERM', () => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
    process.exit(0);
  });
} else {
  serve(cluster.isWorker ? () => {} : markReady);
}
