-- Every change to api_keys notifies the API processes, which keep all keys in memory: a request is
-- then authenticated without a database round trip, so neither a flood of unknown keys costs a
-- query each nor does timing tell an unknown prefix from a wrong secret. The payload is the
-- schema (tests keep keys in their own schemas of one database).
CREATE FUNCTION api_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('skinprices_keys', TG_TABLE_SCHEMA);
  RETURN NULL;
END $$;

CREATE TRIGGER api_keys_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION api_keys_changed();
