-- A version of the key table that a reader can poll: a hot standby refuses LISTEN, so an API
-- process there cannot hear the notification of 0002 and would otherwise have to reload every key
-- on a timer. The trigger bumps the version in the same transaction as the change, so a reader
-- that sees a new version also sees the rows that made it. The version table is named with the
-- trigger's own schema: unqualified, it would resolve through the editing session's search_path
-- (another schema's table, or none at all in a psql session).
CREATE TABLE api_key_version (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  version  bigint NOT NULL
);
INSERT INTO api_key_version (version) VALUES (1);

CREATE OR REPLACE FUNCTION api_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('UPDATE %I.api_key_version SET version = version + 1', TG_TABLE_SCHEMA);
  PERFORM pg_notify('skinprices_keys', TG_TABLE_SCHEMA);
  RETURN NULL;
END $$;
