-- Exactly-once effects per fire, and the audited way to lower a poisoned fence.
-- Placeholders: :FENCES, :CHECK_FN, :APPLIED, :AUDIT, :LOWER_FN (see 000001.sql).
-- New SQLSTATE: FN003  duplicate fire: this resource already applied that fire id.

-- Fires applied per resource. A row is inserted in the same transaction as the handler's writes, so
-- a fire dispatched twice changes the database once. Prune with guard.pruneAppliedFires().
CREATE TABLE :APPLIED (
  resource   text        NOT NULL,
  fire_id    text        NOT NULL,
  token      bigint      NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (resource, fire_id)
);
-- BRIN: applied_at grows with insertion order, so a block-range index serves pruning at almost no
-- cost per insert (a btree here would be a third index write on every guarded write).
CREATE INDEX ON :APPLIED USING brin (applied_at);

-- Every deliberate lowering of a fence, who did it and why. Fences only ever go down through
-- :LOWER_FN, which writes here in the same transaction.
CREATE TABLE :AUDIT (
  id         bigserial   PRIMARY KEY,
  resource   text        NOT NULL,
  from_token bigint,
  to_token   bigint      NOT NULL,
  actor      text        NOT NULL,
  reason     text        NOT NULL,
  at         timestamptz NOT NULL DEFAULT now()
);

-- The check gains an optional fire id. The fence is checked first (a stale dispatch is reported as
-- stale, not as a duplicate), then the fire is claimed: a concurrent duplicate waits on our
-- uncommitted row and finds it once we commit (or claims it if we roll back).
DROP FUNCTION :CHECK_FN(text, bigint, boolean);
CREATE FUNCTION :CHECK_FN(p_resource text, p_token bigint, p_expect_raise boolean, p_fire_id text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  cur bigint;
BEGIN
  IF p_token IS NULL OR p_token < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fencing token must be a positive bigint';
  END IF;
  <<fence>>
  LOOP
    -- Same locking as in 000001.sql; the argument is written out there.
    IF p_expect_raise THEN
      UPDATE :FENCES f SET token = p_token, updated_at = now()
       WHERE f.resource = p_resource AND f.token < p_token;
      IF FOUND THEN EXIT fence; END IF;
    END IF;

    SELECT f.token INTO cur FROM :FENCES f WHERE f.resource = p_resource AND f.token >= p_token FOR SHARE;
    IF FOUND THEN
      IF cur > p_token THEN
        RAISE EXCEPTION USING
          ERRCODE = 'FN001',
          MESSAGE = format('stale fencing token %s for resource %L: highest committed is %s', p_token, p_resource, cur),
          DETAIL = cur::text;
      END IF;
      EXIT fence;
    END IF;

    IF NOT p_expect_raise THEN
      UPDATE :FENCES f SET token = p_token, updated_at = now()
       WHERE f.resource = p_resource AND f.token < p_token;
      IF FOUND THEN EXIT fence; END IF;
    END IF;

    INSERT INTO :FENCES (resource, token) VALUES (p_resource, p_token) ON CONFLICT (resource) DO NOTHING;
    IF FOUND THEN EXIT fence; END IF;
  END LOOP;

  IF p_fire_id IS NOT NULL THEN
    INSERT INTO :APPLIED (resource, fire_id, token) VALUES (p_resource, p_fire_id, p_token)
      ON CONFLICT (resource, fire_id) DO NOTHING;
    IF NOT FOUND THEN
      RAISE EXCEPTION USING
        ERRCODE = 'FN003',
        MESSAGE = format('fire %L was already applied to resource %L', p_fire_id, p_resource);
    END IF;
  END IF;
END
$fn$;

-- Lowers (or sets) a fence on purpose: recovery from a poisoned fence (a forged or mistaken huge
-- token). Never called by the library itself. Waits for in-flight writers like a raise does.
CREATE FUNCTION :LOWER_FN(p_resource text, p_token bigint, p_actor text, p_reason text) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  previous bigint;
BEGIN
  IF p_token IS NULL OR p_token < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fencing token must be a positive bigint';
  END IF;
  IF coalesce(length(trim(p_actor)), 0) = 0 OR coalesce(length(trim(p_reason)), 0) = 0 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'lowering a fence needs an actor and a reason';
  END IF;
  SELECT f.token INTO previous FROM :FENCES f WHERE f.resource = p_resource FOR UPDATE;
  INSERT INTO :FENCES (resource, token) VALUES (p_resource, p_token)
    ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, updated_at = now();
  INSERT INTO :AUDIT (resource, from_token, to_token, actor, reason) VALUES (p_resource, previous, p_token, p_actor, p_reason);
  RETURN previous;
END
$fn$;
