/**
 * The soak's two followers of the price changes, as a downstream customer runs them: one SSE
 * stream (`/v1/prices/stream`, reconnecting with Last-Event-ID as EventSource does) and one reader
 * of the feed's pages (`/v1/prices/changes`, following next_cursor). Each counts its events and
 * keeps every change's cursor with its commit time, so the two can be compared afterwards.
 *
 *   stream:  connecting → open → (ended | failed) → waiting 2 s → connecting …   (detach: no more)
 *   feed:    page → (has_more: page at once | else: wait 2 s) → page …           (stop: no more)
 */
import { request as httpRequest, type ClientRequest } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Recorder } from './soak-recorder.js';
import { send } from './soak-http.js';

export interface Change {
  cursor: string;
  market: string;
  market_hash_name: string;
  phase: string;
  new_price: string | null;
  changed_at: string;
}

export type OnChange = (c: Change, via: 'stream' | 'feed') => void;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class StreamReader {
  events = 0;
  connects = 0;
  /** Why connections ended, other than the reader closing them: `ended`, `error event`, an error code, a status. */
  readonly interruptions: string[] = [];
  /** cursor → changed_at (ms). */
  readonly seen = new Map<string, number>();
  private lastId: string | undefined;
  private req: ClientRequest | undefined;
  private reconnect = true;

  constructor(
    private readonly base: string,
    private readonly key: string,
    private readonly recorder: Recorder,
    private readonly onChange: OnChange,
  ) {}

  start(): void {
    this.connect();
  }

  /** No reconnect after the current connection ends (the platform is being stopped). */
  detach(): void {
    this.reconnect = false;
  }

  close(): void {
    this.reconnect = false;
    this.req?.destroy();
  }

  private connect(): void {
    this.connects++;
    const t0 = performance.now();
    const req = httpRequest(`${this.base}/v1/prices/stream`, {
      headers: {
        'x-api-key': this.key,
        accept: 'text/event-stream',
        ...(this.lastId ? { 'last-event-id': this.lastId } : {}),
      },
    });
    this.req = req;
    let buf = '';
    let ended = false;
    const end = (why: string) => {
      if (ended) return;
      ended = true;
      if (!this.reconnect) return;
      this.interruptions.push(why);
      void sleep(2_000).then(() => this.reconnect && this.connect());
    };
    req.on('response', (res) => {
      this.recorder.record('GET /v1/prices/stream', res.statusCode ?? 'no status', performance.now() - t0);
      if (res.statusCode !== 200) {
        res.resume();
        return end(String(res.statusCode));
      }
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        buf += c;
        let at: number;
        while ((at = buf.indexOf('\n\n')) >= 0) {
          this.dispatch(buf.slice(0, at));
          buf = buf.slice(at + 2);
        }
      });
      res.on('end', () => end('ended'));
      res.on('error', (err: NodeJS.ErrnoException) => end(err.code ?? 'aborted'));
    });
    req.on('error', (err: NodeJS.ErrnoException) => end(err.code ?? err.message));
    req.end();
  }

  /** One SSE event block: `id:`, `event:`, `data:` lines (comments and `retry:` ignored). */
  private dispatch(block: string): void {
    let event = 'message';
    let data = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('id:')) this.lastId = line.slice(3).trim();
      else if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data += line.slice(5).trim();
    }
    if (event === 'error') this.interruptions.push(`error event ${data.slice(0, 200)}`);
    if (event !== 'change') return;
    const c = JSON.parse(data) as Change;
    this.events++;
    this.seen.set(c.cursor, Date.parse(c.changed_at));
    this.onChange(c, 'stream');
  }
}

export class FeedReader {
  events = 0;
  pages = 0;
  /** Answers other than 200, by status: a 410 restarts the reader at `now`. */
  readonly refusals: Record<string, number> = {};
  readonly seen = new Map<string, number>();
  private stopped = false;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly base: string,
    private readonly key: string,
    private readonly recorder: Recorder,
    private readonly onChange: OnChange,
  ) {}

  start(): void {
    this.loop = this.follow();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }

  private async follow(): Promise<void> {
    let cursor = 'now';
    while (!this.stopped) {
      const a = await send(this.base, this.key, {
        method: 'GET',
        path: `/v1/prices/changes?since=${encodeURIComponent(cursor)}&limit=1000`,
      });
      this.recorder.record('GET /v1/prices/changes', a.status, a.ms);
      if (a.status !== 200) {
        this.refusals[String(a.status)] = (this.refusals[String(a.status)] ?? 0) + 1;
        if (a.status === 410) cursor = 'now';
        await sleep(2_000);
        continue;
      }
      this.pages++;
      const page = JSON.parse(a.body.toString('utf8')) as { data: Change[]; next_cursor: string; has_more: boolean };
      for (const c of page.data) {
        this.events++;
        this.seen.set(c.cursor, Date.parse(c.changed_at));
        this.onChange(c, 'feed');
      }
      cursor = page.next_cursor;
      // A full page: the next at once, but not faster than the key's per-second limit allows
      // beside the mix.
      await sleep(page.has_more ? 300 : 2_000);
    }
  }
}

/**
 * Changes committed while both readers were following (from `from` to `to`, ms) that one of them
 * did not see: every change reaches every follower exactly once, so both should be 0.
 */
export function readerDifference(
  stream: StreamReader,
  feed: FeedReader,
  from: number,
  to: number,
): { compared: number; stream_missed: number; feed_missed: number } {
  const inRange = (m: Map<string, number>) => [...m].filter(([, t]) => t > from && t <= to).map(([c]) => c);
  const s = inRange(stream.seen);
  const f = inRange(feed.seen);
  return {
    compared: new Set([...s, ...f]).size,
    stream_missed: f.filter((c) => !stream.seen.has(c)).length,
    feed_missed: s.filter((c) => !feed.seen.has(c)).length,
  };
}
