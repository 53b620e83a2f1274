/**
 * Finds import cycles between our modules: relative imports, and `@skinprices/<pkg>` imports,
 * which resolve to that package's src/index.ts. Type-only imports count too: a cycle through
 * types still couples two modules both ways.
 *
 * (eslint-plugin-import-x's no-cycle would do this, but its native resolver's per-platform
 * optional packages make `npm ci` fail with npm 11 — npm/cli#4828 — so we keep this instead.)
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

export function importsOf(file: string, source: string, root: string): string[] {
  const { importedFiles } = ts.preProcessFile(source, true, true);
  const out: string[] = [];
  for (const { fileName: spec } of importedFiles) {
    let target: string | undefined;
    if (spec.startsWith('.')) {
      target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
    } else {
      const m = /^@skinprices\/([^/]+)$/.exec(spec);
      if (m) {
        const name = m[1] as string;
        const pkg = join(root, 'packages', name, 'src', 'index.ts');
        target = existsSync(pkg) ? pkg : join(root, 'services', name, 'src', 'index.ts');
      }
    }
    if (target && existsSync(target)) out.push(target);
  }
  return out;
}

/** Strongly connected components with more than one module (or a self-import): the cycles. */
export function findCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(scc.reverse());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

function main(): void {
  const root = resolve(import.meta.dirname, '../..');
  const files = ts.sys
    .readDirectory(
      root,
      ['.ts'],
      ['**/node_modules/**', '**/.local/**'],
      ['packages/*/src/**/*', 'services/*/src/**/*'],
    )
    .map((f) => resolve(f));
  const graph = new Map<string, string[]>();
  for (const f of files) graph.set(f, importsOf(f, readFileSync(f, 'utf8'), root));
  const cycles = findCycles(graph);
  for (const c of cycles) console.error(`import cycle: ${c.map((f) => relative(root, f)).join(' -> ')}`);
  console.error(`import-cycles: ${files.length} modules, ${cycles.length} cycle(s)`);
  process.exit(cycles.length > 0 ? 1 : 0);
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) main();
