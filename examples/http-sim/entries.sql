-- The ledger service's own table: one entry per call it applied. Commit order is what the simulation
-- judges, so a deferred constraint trigger stamps each row at COMMIT with a sequence number and the
-- database clock (as settlements.sql does for the BullMQ service).
CREATE SEQUENCE entry_commit_order;
CREATE TABLE entries (
  id           bigserial   PRIMARY KEY,
  fire_id      text        NOT NULL,
  token        bigint      NOT NULL,
  caller       text        NOT NULL,
  scheduled_at timestamptz NOT NULL,
  committed_at timestamptz,
  commit_seq   bigint
);
CREATE FUNCTION entry_stamp_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE entries SET commit_seq = nextval('entry_commit_order'), committed_at = clock_timestamp() WHERE id = NEW.id;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER entry_stamp_commit AFTER INSERT ON entries
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION entry_stamp_commit();
