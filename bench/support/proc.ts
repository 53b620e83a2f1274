/** Processes as the kernel lists them (/proc), for benches and tests that look at a cluster's workers. */
import { readdirSync, readFileSync } from 'node:fs';

/**
 * Every descendant of `pid` (a cluster primary's workers, theirs in turn), from the kernel's
 * per-thread lists of children; a process gone meanwhile is skipped.
 */
export function descendants(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const children = tasks.flatMap((t) => {
    try {
      return readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  });
  return children.flatMap((c) => [c, ...descendants(c)]);
}
