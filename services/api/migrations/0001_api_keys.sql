-- API keys live in their own schema: `make replay` rebuilds and swaps the read model's schema,
-- and must never take the customers' keys with it.
-- A key is stored as the SHA-256 of its secret (the secret is shown once, at creation); the
-- prefix finds the row, the hash is compared in constant time.
CREATE TABLE api_keys (
  id                bigserial PRIMARY KEY,
  prefix            text NOT NULL UNIQUE,
  secret_sha256     bytea NOT NULL,
  customer          text NOT NULL,
  plan              text NOT NULL CHECK (plan IN ('basic', 'pro', 'enterprise')),
  -- NULL: every endpoint of the plan; otherwise only these endpoint ids (see src/plans.ts)
  allowed_endpoints text[],
  disabled          boolean NOT NULL DEFAULT false,
  expires_at        timestamptz,
  per_second        integer NOT NULL DEFAULT 10 CHECK (per_second > 0),
  per_minute        integer NOT NULL CHECK (per_minute > 0),
  per_day           integer NOT NULL CHECK (per_day > 0),
  created_at        timestamptz NOT NULL DEFAULT now(),
  note              text
);
