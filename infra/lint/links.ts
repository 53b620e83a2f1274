/**
 * Every relative link of README.md and docs/ points at a file that exists and, into a Markdown
 * page, at a heading it has (GitHub's anchors). docs/api.md is complete in its own words: no link
 * of it leaves the repository. Links outside the repository are not fetched (CI has no internet).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(new URL('../..', import.meta.url).pathname);
const SELF_CONTAINED = new Set(['docs/api.md']);

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens; repeats numbered. */
export function anchors(markdown: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = (m[1] as string)
      .toLowerCase()
      .replace(/<[^>]+>/g, '')
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The link targets of a Markdown text, outside code: inline links and images, and reference definitions. */
export function links(markdown: string): string[] {
  const text = markdown.replace(/^(```|~~~)[\s\S]*?^\1/gm, '').replace(/`[^`\n]*`/g, '');
  const out: string[] = [];
  for (const m of text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push(m[1] as string);
  for (const m of text.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/gm)) out.push(m[1] as string);
  return out;
}

function pages(): string[] {
  const out = ['README.md'];
  const walk = (dir: string) => {
    for (const name of readdirSync(join(ROOT, dir))) {
      const path = join(dir, name);
      if (statSync(join(ROOT, path)).isDirectory()) walk(path);
      else if (name.endsWith('.md')) out.push(path);
    }
  };
  walk('docs');
  return out;
}

export function problems(): string[] {
  const found: string[] = [];
  const headings = new Map<string, Set<string>>();
  const anchorsOf = (file: string) => {
    let a = headings.get(file);
    if (!a) headings.set(file, (a = anchors(readFileSync(file, 'utf8'))));
    return a;
  };
  for (const page of pages()) {
    const file = join(ROOT, page);
    for (const target of links(readFileSync(file, 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
        if (SELF_CONTAINED.has(page) && !target.startsWith('mailto:'))
          found.push(`${page}: ${target}: this page links only inside the repository`);
        continue;
      }
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const to = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
      if (!to.startsWith(ROOT) || !existsSync(to)) {
        found.push(`${page}: ${target}: no such file`);
        continue;
      }
      if (anchor && to.endsWith('.md') && !anchorsOf(to).has(anchor.toLowerCase()))
        found.push(`${page}: ${target}: ${relative(ROOT, to)} has no heading #${anchor}`);
    }
  }
  return found;
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const found = problems();
  for (const p of found) console.error(p);
  if (found.length > 0) process.exitCode = 1;
}
