/** One error body everywhere (design.md): {"error":{"status":403,"code":"plan_required","message":"…"}}. */
/** Every code an error body can carry (the document lists them: a client can switch on them). */
export const API_ERROR_CODES = [
  'key_missing',
  'key_invalid',
  'key_disabled',
  'key_expired',
  'plan_required',
  'endpoint_not_allowed',
  'rate_limited',
  'auth_rate_limited',
  'bad_parameter',
  'bad_request',
  'not_found',
  'method_not_allowed',
  'uri_too_long',
  'headers_too_large',
  'expectation_failed',
  'request_timeout',
  'payload_too_large',
  'unsupported_media_type',
  'not_available',
  'cursor_expired',
  'too_many_streams',
  'webhook_limit',
  'webhook_daily_limit',
  'webhooks_unavailable',
  'internal',
] as const;
export type ApiErrorCode = (typeof API_ERROR_CODES)[number];

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ApiErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
    /** The error this answers for (logged with it, never sent). */
    cause?: unknown,
  ) {
    super(message, cause === undefined ? undefined : { cause });
  }

  body(): { error: { status: number; code: ApiErrorCode; message: string } } {
    return { error: { status: this.status, code: this.code, message: this.message } };
  }
}

export const badParameter = (name: string, why: string): ApiError =>
  new ApiError(400, 'bad_parameter', `${name}: ${why}`);
