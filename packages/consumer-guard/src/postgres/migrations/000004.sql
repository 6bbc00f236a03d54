-- Writes that commit only while their lease lives (the guard's checkLease option), when the lease
-- is kept in this database by @fenced/coordinator/postgres, beside these fences.
-- Placeholders: :CHECK_FN (see 000003.sql), :LEASES (the lease rows: "<table>_leases", created by
-- the lease store's own migration), :CHECKED_FN (this check).
-- New SQLSTATE: FN004  lease not held: the token's term is over. DETAIL holds the lease's token now.
--
-- The fence check of 000003.sql, then, in the same transaction, the lease: held by this very token,
-- and not expired by the server's clock. The lease row is read FOR KEY SHARE and stays locked until
-- the write commits or rolls back: an election takes the row FOR UPDATE, which waits for every such
-- write, so a new term is granted only after every write its predecessor's term admitted has ended.
-- A renew changes no key column (FOR NO KEY UPDATE) and does not wait for them. A deposed leader's
-- write is refused here even before the next leader has written anything.
--
-- The lease's tag ("lease:" and 12 hex digits of md5 of its name) is announced in application_name
-- with the token, after the fence check's own announcement: an election waiting on this row past
-- its grace period ends the announced writes of its lease's expired terms (see the lease store's
-- acquire), and nothing else.
CREATE FUNCTION :CHECKED_FN(p_resource text, p_token bigint, p_expect_raise boolean, p_fire_id text, p_lease text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  cur record;
BEGIN
  IF coalesce(p_lease, '') = '' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a lease-checked write needs its lease name';
  END IF;
  PERFORM :CHECK_FN(p_resource, p_token, p_expect_raise, p_fire_id);
  PERFORM set_config('application_name', 'fenced:' || p_token::text || ' lease:' || substr(md5(p_lease), 1, 12) || ' ' || current_setting('application_name'), true);
  SELECT l.token, l.holder, l.expires_at INTO cur FROM :LEASES l WHERE l.name = p_lease FOR KEY SHARE;
  IF NOT FOUND OR cur.token IS DISTINCT FROM p_token OR cur.holder IS NULL OR cur.expires_at <= clock_timestamp() THEN
    RAISE EXCEPTION USING
      ERRCODE = 'FN004',
      MESSAGE = format('lease %L is not held by token %s (its token is %s)', p_lease, p_token, coalesce(cur.token::text, 'none')),
      DETAIL = coalesce(cur.token::text, '');
  END IF;
END
$fn$;
