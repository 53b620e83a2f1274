/*
 * kafkajs 2.2.4 spins on every idle broker connection: its request queue re-arms
 * `setTimeout(check, throttledUntil - now)` after every check, and with nothing pending and no
 * throttle that delay is negative — Node runs it after 1 ms, which checks again and re-arms
 * again (tulios/kafkajs#1556, #1704; the fix in PR #1667 is not in any release, and 2.2.4 is the
 * last one). An idle process's main thread so wakes about every millisecond and spends a few
 * percent of a core doing nothing — per connection, in every one of the platform's processes. The
 * 14 pollers and the materializer hold ~40 such connections: up to half of a two-core machine's
 * second core, taken from the cold start and from every price change's way to the API.
 *
 * The replacement keeps every reason the original schedules a check — a pending request (at
 * least CHECK_PENDING_REQUESTS_INTERVAL, 10 ms, later: the marginal-throttle case of #1532), or a
 * throttle still running — and drops only the one that is no reason: nothing pending and no
 * throttle. A request pushed later schedules its own check (push), and a response frees the
 * queue through `fulfillRequest` → `checkPendingRequests`, so nothing waits on the dropped timer.
 *
 * It patches the class kafkajs itself requires (same module cache: kafkajs has no `exports`
 * map, so the deep path is the file its connections use) and only when the method is the known
 * buggy one, so a kafkajs that fixed it upstream is left alone; test/integration/kafka-idle.test.ts
 * fails if an idle connection spins again, whichever the reason.
 */
import { createRequire } from 'node:module';

interface RequestQueueLike {
  throttledUntil: number;
  pending: unknown[];
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}

/** kafkajs's own value (requestQueue/index.js): the earliest re-check of a pending request. */
const CHECK_PENDING_REQUESTS_INTERVAL = 10;

/** What identifies the buggy method's body (a negative delay reaches setTimeout). */
const BUGGY =
  /if \(this\.pending\.length > 0\) \{\s*scheduleAt = scheduleAt > 0 \? scheduleAt : CHECK_PENDING_REQUESTS_INTERVAL\s*\}\s*this\.throttleCheckTimeoutId = setTimeout/;

function scheduleCheckPendingRequests(this: RequestQueueLike): void {
  if (this.throttleCheckTimeoutId) return;
  const throttledFor = this.throttledUntil - Date.now();
  let delay: number;
  if (this.pending.length > 0) delay = throttledFor > 0 ? throttledFor : CHECK_PENDING_REQUESTS_INTERVAL;
  else if (throttledFor > 0) delay = throttledFor;
  else return; // nothing pending, nothing throttled: nothing to check
  this.throttleCheckTimeoutId = setTimeout(() => {
    this.throttleCheckTimeoutId = null;
    this.checkPendingRequests();
  }, delay);
}

export type IdleLoopPatch = 'patched' | 'not-needed';

export interface RequestQueueClass {
  prototype: RequestQueueLike;
}

/** Replaces `queue`'s scheduler when it is the known buggy one; says which it was. */
export function patchRequestQueue(queue: RequestQueueClass): IdleLoopPatch {
  const current = queue.prototype.scheduleCheckPendingRequests;
  if (current === scheduleCheckPendingRequests || !BUGGY.test(current.toString())) return 'not-needed';
  queue.prototype.scheduleCheckPendingRequests = scheduleCheckPendingRequests;
  return 'patched';
}

/** The request-queue module kafkajs's connections use. */
export const KAFKAJS_REQUEST_QUEUE = 'kafkajs/src/network/requestQueue/index.js';

let done = false;

/** Patches kafkajs's request queue once per process (createKafka calls it). */
export function patchKafkajsIdleLoop(): void {
  if (done) return;
  done = true;
  const require = createRequire(import.meta.url);
  let queue: RequestQueueClass;
  try {
    queue = require(KAFKAJS_REQUEST_QUEUE) as RequestQueueClass;
  } catch {
    // A kafkajs whose files moved: nothing to patch here, and no reason to stop the service
    // (test/integration/kafka-idle.test.ts says whether its idle connections spin).
    return;
  }
  patchRequestQueue(queue);
}
