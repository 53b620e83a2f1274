/**
 * The services compiled ahead, as deployed: one ES module per entry (`services/<name>/src/main.ts`
 * → `<outDir>/<name>.mjs`, with a source map), our packages bundled in, everything from
 * node_modules left to Node's resolution. Run under `node --import tsx`, every process compiled
 * its ~150 modules at start with its own loader thread: loading the API's module graph took
 * 2.9–3.3 CPU-s and 143–152 MB RSS under tsx against 1.1–1.4 CPU-s and 89 MB from the bundle, a
 * poller's 1.7–2.0 CPU-s and 110 MB against 0.75–0.96 CPU-s and 83–85 MB (idle machine, 3 runs
 * each), and the platform starts 17 such processes (14 pollers) on two cores at once.
 *
 * A module that finds its files next to its source (`new URL('../migrations/', import.meta.url)`)
 * keeps finding them: in each of our modules `import.meta.url` becomes its source file's URL,
 * computed from the bundle's own URL (a bundle and the checkout it was built from move together).
 *
 *   node --import tsx infra/local/build.ts [outDir]   (make build: dist/, what a deployment runs)
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { processExists } from './run-guard.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** Every service's entry. */
export const SERVICE_ENTRIES = ['simulator', 'poller', 'materializer', 'api', 'notifier'].map(
  (s) => `services/${s}/src/main.ts`,
);

/** Bare imports other than our workspace packages stay imports (node_modules, node: built-ins). */
const externalDependencies: Plugin = {
  name: 'external-dependencies',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) =>
      args.path.startsWith('@skinprices/') ? undefined : { path: args.path, external: true },
    );
  },
};

/** `import.meta.url` in each of our modules is its source file's URL, relative to the bundle. */
function sourceUrls(outDir: string): Plugin {
  return {
    name: 'source-urls',
    setup(b) {
      b.onLoad({ filter: /\.ts$/ }, async (args) => {
        const text = await readFile(args.path, 'utf8');
        if (!text.includes('import.meta.url')) return { contents: text, loader: 'ts' };
        const path = relative(outDir, args.path).split('\\').join('/');
        return {
          contents: text.replaceAll('import.meta.url', `new URL(${JSON.stringify(path)}, import.meta.url).href`),
          loader: 'ts',
        };
      });
    },
  };
}

/**
 * A new directory for one run's bundles, inside the checkout (`.local/build/<prefix><pid>-…`):
 * Node finds a bundle's dependencies in the node_modules of the directories above it, which a
 * directory under /tmp has not. Its own per run, so that two platforms starting at once (another
 * schema, the tests) never load a bundle the other is writing; `remove` deletes it, and the
 * directories of runs whose process is gone (killed before it could) are deleted here.
 */
export function buildDirectory(prefix: string): { dir: string; remove: () => void } {
  const parent = join(ROOT, '.local', 'build');
  mkdirSync(parent, { recursive: true });
  for (const name of readdirSync(parent)) {
    const pid = Number(/^[a-z-]+-(\d+)-/.exec(name)?.[1]);
    if (pid > 0 && !processExists(pid)) rmSync(join(parent, name), { recursive: true, force: true });
  }
  const dir = mkdtempSync(join(parent, `${prefix}${process.pid}-`));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The bundle an entry is compiled to: `services/api/src/main.ts` → `<outDir>/api.mjs`. */
export function bundleOf(entry: string, outDir: string): string {
  const name = entry.startsWith('services/') ? (entry.split('/')[1] as string) : basename(entry, '.ts');
  return resolve(outDir, `${name}.mjs`);
}

/**
 * Compiles `entries` (paths from the repository's root) into `outDir`; returns each entry's
 * bundle. About a second for the four services: done at every start, so a bundle is never older
 * than its source.
 */
export async function buildServices(entries: readonly string[], outDir: string): Promise<Map<string, string>> {
  const out = new Map(entries.map((e) => [e, bundleOf(e, outDir)]));
  await Promise.all(
    entries.map((entry) =>
      build({
        entryPoints: [resolve(ROOT, entry)],
        outfile: out.get(entry),
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20',
        sourcemap: true,
        logLevel: 'warning',
        plugins: [externalDependencies, sourceUrls(outDir)],
      }),
    ),
  );
  return out;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outDir = resolve(process.argv[2] ?? join(ROOT, 'dist'));
  for (const bundle of (await buildServices(SERVICE_ENTRIES, outDir)).values())
    process.stdout.write(`${relative(process.cwd(), bundle)}\n`);
}
