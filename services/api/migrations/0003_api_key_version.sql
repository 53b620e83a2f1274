-- A version of the key table that a reader can poll: a hot standby refuses LISTEN, so an API
-- process there cannot hear the notification of 0002 and would otherwise have to reload every key
-- on a timer. The trigger bumps the version in the same transaction as the change, so a reader
-- that sees a new version also sees the rows that made it.
CREATE TABLE api_key_version (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  version  bigint NOT NULL
);
INSERT INTO api_key_version (version) VALUES (1);

CREATE OR REPLACE FUNCTION api_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE api_key_version SET version = version + 1;
  PERFORM pg_notify('skinprices_keys', TG_TABLE_SCHEMA);
  RETURN NULL;
END $$;
