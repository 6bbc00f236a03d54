-- The fence table and the two functions that touch it.
-- Placeholders (replaced with quoted, validated identifiers by the migrator):
--   :FENCES      the fence table
--   :CHECK_FN    the in-transaction check
--   :ADVANCE_FN  the strict advance
-- SQLSTATEs raised here (the client branches on them, never on message text):
--   FN001  stale token: DETAIL holds the highest committed token
--   FN002  strict advance refused: DETAIL holds the fence's current token

CREATE TABLE :FENCES (
  resource   text        PRIMARY KEY,
  token      bigint      NOT NULL CHECK (token > 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Checks p_token against the fence of p_resource inside the caller's transaction and raises the
-- fence when p_token is higher.
--
-- Locking argument. Every transaction that passes the check holds a lock on the fence row until it
-- commits or rolls back:
--   * a higher token raises the fence with UPDATE, which takes the row's exclusive lock and so waits
--     for every share holder: a raise commits only after all in-flight transactions that validated
--     against the old fence have finished, and it keeps its lock until its own commit;
--   * an equal token (the common case: one leader writing many times) takes FOR SHARE. Share locks
--     do not conflict with each other, so same-token writers run in parallel.
-- A writer that arrives while a raise is pending queues behind it; in READ COMMITTED both UPDATE and
-- FOR SHARE then re-read the newest committed version of the row and re-evaluate their WHERE clause
-- on it, so a lower token finds the raised fence and is refused. The fence a transaction validated
-- against therefore cannot change before that transaction commits, and commits on one resource are
-- ordered by token. In REPEATABLE READ and SERIALIZABLE, PostgreSQL refuses to lock a row changed
-- after the snapshot (40001) and the client retries the transaction.
--
-- No lock upgrades: the share lock is only ever taken on a fence at or above p_token (WHERE token >=
-- p_token), which this transaction will never need to raise; the UPDATE only matches a fence below
-- p_token. So no transaction holds a share lock while it waits for the exclusive one (two such
-- raisers would deadlock). Either order of the two statements is therefore safe, and
-- p_expect_raise (the client's guess from the last fence it saw) only picks the order that usually
-- succeeds with one statement. A wrong guess costs one more statement, never correctness.
CREATE FUNCTION :CHECK_FN(p_resource text, p_token bigint, p_expect_raise boolean) RETURNS void
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  cur bigint;
BEGIN
  IF p_token IS NULL OR p_token < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fencing token must be a positive bigint';
  END IF;
  LOOP
    IF p_expect_raise THEN
      UPDATE :FENCES f SET token = p_token, updated_at = now()
       WHERE f.resource = p_resource AND f.token < p_token;
      IF FOUND THEN RETURN; END IF;
    END IF;

    SELECT f.token INTO cur FROM :FENCES f WHERE f.resource = p_resource AND f.token >= p_token FOR SHARE;
    IF FOUND THEN
      IF cur > p_token THEN
        RAISE EXCEPTION USING
          ERRCODE = 'FN001',
          MESSAGE = format('stale fencing token %s for resource %L: highest committed is %s', p_token, p_resource, cur),
          DETAIL = cur::text;
      END IF;
      RETURN;
    END IF;

    IF NOT p_expect_raise THEN
      UPDATE :FENCES f SET token = p_token, updated_at = now()
       WHERE f.resource = p_resource AND f.token < p_token;
      IF FOUND THEN RETURN; END IF;
    END IF;

    -- No row at all (first write on this resource), or the row moved between our statements.
    -- The inserted row stays locked until we commit.
    INSERT INTO :FENCES (resource, token) VALUES (p_resource, p_token) ON CONFLICT (resource) DO NOTHING;
    IF FOUND THEN RETURN; END IF;
  END LOOP;
END
$fn$;

-- Raises the fence of p_resource to p_token without a write. Strict: refuses (FN002) when the fence
-- already holds p_token or more, because two elections must never share a token. The upsert takes
-- the row's exclusive lock, so it waits for in-flight writers that validated against the old fence.
CREATE FUNCTION :ADVANCE_FN(p_resource text, p_token bigint) RETURNS void
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  cur bigint;
BEGIN
  IF p_token IS NULL OR p_token < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fencing token must be a positive bigint';
  END IF;
  INSERT INTO :FENCES AS f (resource, token) VALUES (p_resource, p_token)
  ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, updated_at = now()
   WHERE f.token < EXCLUDED.token;
  IF FOUND THEN RETURN; END IF;
  SELECT f.token INTO cur FROM :FENCES f WHERE f.resource = p_resource;
  RAISE EXCEPTION USING
    ERRCODE = 'FN002',
    MESSAGE = format('fence for resource %L is already at %s, not below %s', p_resource, cur, p_token),
    DETAIL = cur::text;
END
$fn$;
