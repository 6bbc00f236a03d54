-- A new term must not wait for a deposed leader that froze inside its transaction.
-- Placeholders: :FENCES, :CHECK_FN, :APPLIED, :TAKEOVER_FN (see 000001.sql).
--
-- A guarded transaction holds a lock on its fence row until it ends; the election-time advance
-- needs that row, and a lease that expires releases nothing in the database. So the advance waits a
-- grace period, then asks :TAKEOVER_FN to end the transactions that block it and were opened by a
-- guarded write of a lower token: by the fence's promise those can never commit under the new term
-- anyway (the raise waits for them, then refuses everything below it), and their process may never
-- wake (a SIGSTOP, a hung VM, a stopped container). Ending one rolls it back; its process sees its
-- connection killed and gets GuardUnavailableError.
--
-- How the advance knows a blocker's token: the check announces it in the session's
-- application_name for the transaction alone (set_config(..., true), undone at COMMIT or ROLLBACK):
-- "fenced:<token> <the application's own name>". pg_stat_activity shows it to every session with
-- the right to see that backend, and pg_blocking_pids names exactly the backends the advance waits
-- for, so nothing else is ever ended: not a transaction of the same or a higher token (a live leader
-- of a newer term), not a session that did not announce a token (an operator's own transaction, a
-- migration), not a guarded write that does not block this fence.

-- The check of 000002.sql, announcing the token first.
CREATE OR REPLACE FUNCTION :CHECK_FN(p_resource text, p_token bigint, p_expect_raise boolean, p_fire_id text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  cur bigint;
BEGIN
  IF p_token IS NULL OR p_token < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fencing token must be a positive bigint';
  END IF;
  -- Before any lock is taken: a transaction is announced for as long as it can block a raise.
  PERFORM set_config('application_name', 'fenced:' || p_token::text || ' ' || current_setting('application_name'), true);
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

-- Ends the guarded transactions of a token below p_token that block backend p_waiter (an advance
-- to p_token waiting on a fence row). One row per such blocker: its pid, the token it announced,
-- and whether it was ended (false when this role may not signal it: superuser, the same role, or
-- pg_signal_backend can). pg_terminate_backend only signals: the blocker's locks go when it exits,
-- a moment later, and the waiting advance then proceeds by itself.
CREATE FUNCTION :TAKEOVER_FN(p_waiter integer, p_token bigint) RETURNS TABLE (pid integer, token numeric, ended boolean)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  blocker record;
BEGIN
  FOR blocker IN
    SELECT a.pid AS id, substring(a.application_name FROM '^fenced:([0-9]{1,19})(?: |$)')::numeric AS announced
      FROM pg_stat_activity a
     WHERE a.pid = ANY (pg_blocking_pids(p_waiter))
  LOOP
    CONTINUE WHEN blocker.announced IS NULL OR blocker.announced >= p_token;
    pid := blocker.id;
    token := blocker.announced;
    BEGIN
      ended := pg_terminate_backend(blocker.id);
    EXCEPTION WHEN insufficient_privilege THEN
      ended := false;
    END;
    RETURN NEXT;
  END LOOP;
END
$fn$;
