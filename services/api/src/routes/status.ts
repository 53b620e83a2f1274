/** GET /v1/status (beyond the spec): is the data fresh, and is the pipeline alive (status.ts). */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { loadStatus } from '../status.js';
import type { RouteContext } from './context.js';
import { closed, IntOrNull, keyFields, responses, Ts, TsOrNull } from './schemas.js';
import { keyFieldsOf, sendObject } from './send.js';

const Materializer = closed({
  member_id: Type.String(),
  group_id: Type.String(),
  host: Type.String(),
  pid: Type.Integer(),
  state: Type.String({ description: "the process's loop state (e.g. consuming, erroring)" }),
  started_at: Ts,
  heartbeat_at: Ts,
  heartbeat_age_seconds: Type.Integer(),
  alive: Type.Boolean(),
  last_batch_at: TsOrNull,
  lag: IntOrNull,
});

const MarketFreshness = closed({
  market: Type.String(),
  kind: Type.String({ description: 'the poll-cycle kind: LISTINGS, BUYORDERS, SALES, …' }),
  refresh_interval_seconds: Type.Integer(),
  stale_after_seconds: Type.Integer(),
  last_outcome: Type.Unsafe<string>({ type: 'string', enum: ['COMPLETE', 'PARTIAL', 'FAILED'] }),
  last_cycle_at: Ts,
  last_complete_at: TsOrNull,
  last_applied_at: TsOrNull,
  last_complete_applied_at: TsOrNull,
  age_seconds: IntOrNull,
  stale: Type.Boolean(),
  failed_in_a_row: Type.Integer(),
});

const StatusAnswer = closed({
  status: Type.Unsafe<string>({ type: 'string', enum: ['ok', 'degraded'] }),
  now: Ts,
  data_time: TsOrNull,
  pipeline: closed({
    status: Type.Unsafe<string>({ type: 'string', enum: ['ok', 'stalled', 'down'] }),
    problems: Type.Array(Type.String()),
    lag: IntOrNull,
    last_batch_at: TsOrNull,
    materializers: Type.Array(Materializer),
  }),
  database: closed({
    role: Type.Unsafe<string>({
      type: 'string',
      enum: ['primary', 'standby'],
      description: 'standby: this process reads from a read replica of the primary the pipeline writes to',
    }),
    replay_lag_seconds: Type.Union([Type.Number(), Type.Null()], {
      description: "on a standby, how far its data is behind the primary's (0: all replayed); null on a primary",
    }),
    replay_lag_bytes: Type.Union([Type.Integer(), Type.Null()], {
      description: 'on a standby, WAL received from the primary but not yet replayed; null on a primary',
    }),
    receiving: Type.Union([Type.Boolean(), Type.Null()], {
      description: 'on a standby, whether WAL streams from the primary; null on a primary or where not visible',
    }),
    degraded_after_seconds: Type.Number(),
    status: Type.Unsafe<string>({
      type: 'string',
      enum: ['ok', 'lagging'],
      description: 'lagging: more than degraded_after_seconds behind, or receiving nothing (status is then degraded)',
    }),
  }),
  dead_letters: Type.Array(
    closed({
      topic: Type.String(),
      reason: Type.Unsafe<string>({ type: 'string', enum: ['decode', 'sql'] }),
      count: Type.Integer(),
      last_at: Ts,
    }),
  ),
  stale_count: Type.Integer(),
  markets: Type.Array(MarketFreshness),
  ...keyFields,
});

export function registerStatusRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.get(
    '/v1/status',
    {
      config: { endpoint: 'GET /v1/status' },
      schema: {
        summary:
          "Is the data fresh and the pipeline alive: per marketplace and kind the age of the last complete cycle on the wall clock and a stale flag (2 × the kind's refresh interval + grace); materializer heartbeats, lag and dead letters; on a read replica, how far behind its primary",
        response: responses({ ok: StatusAnswer }),
      },
    },
    async (req, reply) => {
      const report = await loadStatus(ctx.read, ctx.status);
      return sendObject(reply, { ...report, ...keyFieldsOf(req) }, 'no-cache');
    },
  );
}
