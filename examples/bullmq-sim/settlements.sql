-- The service's own table: one settlement per fire of the `settle` job. Commit order is what the
-- simulation judges, so a deferred constraint trigger stamps each row at COMMIT with a sequence
-- number and the database clock.
CREATE SEQUENCE settlement_commit_order;
CREATE TABLE settlements (
  id           bigserial   PRIMARY KEY,
  fire_id      text        NOT NULL,
  token        bigint      NOT NULL,
  worker       text        NOT NULL,
  scheduled_at timestamptz NOT NULL,
  committed_at timestamptz,
  commit_seq   bigint
);
CREATE FUNCTION settlement_stamp_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE settlements SET commit_seq = nextval('settlement_commit_order'), committed_at = clock_timestamp() WHERE id = NEW.id;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER settlement_stamp_commit AFTER INSERT ON settlements
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION settlement_stamp_commit();
