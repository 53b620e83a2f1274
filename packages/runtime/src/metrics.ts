/**
 * Serves a prom-client registry as Prometheus text on `/metrics`, on its own listener: operators'
 * scrapers reach it on an internal address, never through the public API port. Every service
 * (pollers, materializer, API) uses this one server; each keeps its own registry so tests can run
 * several services in one process.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface MetricsServer {
  url: string;
  close: () => Promise<void>;
}

/** Listens on host:port (port 0 picks a free port) and answers `GET /metrics`; anything else is 404. */
export async function serveMetrics(
  registry: { metrics(): Promise<string>; contentType: string },
  host: string,
  port: number,
): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return {
    url: `http://${host}:${(server.address() as AddressInfo).port}/metrics`,
    // Every connection is cut, not waited for: a scraper's keep-alive connection (or one opened
    // but not used yet) would hold close() open, and a scrape lost at a stop costs nothing.
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
