/**
 * The ledger the simulated replicas write to: one row per fire that took effect. Commit order is
 * what the promise is about, so a deferred constraint trigger stamps each row at COMMIT with a
 * sequence number and the database clock.
 */
export const LEDGER_SQL = `
  CREATE SEQUENCE ledger_commit_order;
  CREATE TABLE ledger (
    id           bigserial   PRIMARY KEY,
    resource     text        NOT NULL,
    fire_id      text        NOT NULL,
    token        bigint      NOT NULL,
    node         text        NOT NULL,
    scheduled_at timestamptz NOT NULL,
    committed_at timestamptz,
    commit_seq   bigint
  );
  CREATE FUNCTION ledger_stamp_commit() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    UPDATE ledger SET commit_seq = nextval('ledger_commit_order'), committed_at = clock_timestamp() WHERE id = NEW.id;
    RETURN NULL;
  END $$;
  CREATE CONSTRAINT TRIGGER ledger_stamp_commit AFTER INSERT ON ledger
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_stamp_commit();
`;

export const RESOURCE = 'ledger';
export const JOB = 'ledger';

export const INSERT_SQL = `INSERT INTO ledger (resource, fire_id, token, node, scheduled_at) VALUES ($1, $2, $3, $4, $5)`;

/** The one lease the replicas contend for. */
export const LEASE = 'ledger-sim';
