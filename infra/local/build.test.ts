import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildDirectory, buildServices, bundleOf, SERVICE_ENTRIES } from './build.js';

const dirs: string[] = [];
const temp = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('buildServices', () => {
  it('names each service’s bundle after it', () => {
    expect(SERVICE_ENTRIES.map((e) => bundleOf(e, '/out'))).toEqual([
      '/out/simulator.mjs',
      '/out/poller.mjs',
      '/out/materializer.mjs',
      '/out/api.mjs',
      '/out/notifier.mjs',
    ]);
  });

  it('keeps files next to a module’s source (import.meta.url) and its dependencies found from the bundle', async () => {
    // A module that reads a file beside its source, as the migrations and Avro schemas are read.
    const src = temp('build-src-');
    mkdirSync(join(src, 'lib', 'data'), { recursive: true });
    writeFileSync(join(src, 'lib', 'data', 'greeting.txt'), 'found');
    writeFileSync(
      join(src, 'lib', 'read.ts'),
      `import { readFileSync } from 'node:fs';
       export const greeting = (): string => readFileSync(new URL('./data/greeting.txt', import.meta.url), 'utf8');`,
    );
    // And a dependency from node_modules, which Node resolves from where the bundle is.
    writeFileSync(
      join(src, 'main.ts'),
      `import Decimal from 'decimal.js';\nimport { greeting } from './lib/read.js';\nconsole.log(greeting(), new Decimal('0.1').plus('0.2').toString());`,
    );
    const out = buildDirectory('test-');
    dirs.push(out.dir);
    const bundle = (await buildServices([join(src, 'main.ts')], out.dir)).get(join(src, 'main.ts')) as string;
    expect(bundle).toBe(join(out.dir, 'main.mjs'));
    const run = spawnSync(process.execPath, ['--enable-source-maps', bundle], { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('found 0.3');
    out.remove();
    expect(existsSync(out.dir)).toBe(false);
  });

  it('deletes the build directories of runs whose process is gone, and keeps those of live ones', () => {
    const dead = spawnSync(process.execPath, ['-e', '0']).pid as number;
    const first = buildDirectory('test-');
    dirs.push(first.dir);
    const parent = join(first.dir, '..');
    const stale = join(parent, `run-${dead}-abcdef`);
    const live = join(parent, `run-${process.pid}-abcdef`);
    for (const d of [stale, live]) mkdirSync(d, { recursive: true });
    dirs.push(live);
    const next = buildDirectory('test-');
    dirs.push(next.dir);
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(live)).toBe(true);
    expect(next.dir.startsWith(join(parent, `test-${process.pid}-`))).toBe(true);
  });

  it('leaves packages from node_modules to Node and bundles our own', async () => {
    const out = temp('build-api-');
    const bundle = (await buildServices(['services/api/src/main.ts'], out)).get('services/api/src/main.ts') as string;
    const text = (await import('node:fs')).readFileSync(bundle, 'utf8');
    expect(text).toMatch(/from "fastify"/);
    expect(text).not.toMatch(/from "@skinprices\//);
    // The migrations are found where the source has them.
    expect(text).toContain('new URL("../migrations/", new URL(');
  });
});
