/**
 * Writes a benchmark's (or a chaos scenario's) output formatted as `make lint` checks it
 * (prettier, with the repository's configuration): bench/results.md and the result files were
 * regenerated unformatted, and lint then failed until someone ran prettier by hand (twice in
 * issue 12's sessions). reliability/run.ts did this on its own; it now uses this one.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { format, resolveConfig } from 'prettier';

/** `text` as prettier formats a file at `path` (its parser by the extension). */
export async function formatted(path: string, text: string): Promise<string> {
  return format(text, { ...((await resolveConfig(path)) ?? {}), filepath: path });
}

export async function writeFormatted(path: string, text: string): Promise<void> {
  const pretty = await formatted(path, text);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, pretty);
}
