-- A lease-checked write may name the node its token was issued to (the envelope's issuer): the lease
-- must then be held by that very node with that very token, not only by the token.
-- Placeholders: as in 000004.sql.
--
-- Why: after a lossy failover of the lease's database (an asynchronous standby promoted without the
-- last grant), an election on the promoted standby can mint a token again that a deposed leader
-- still holds until its deadline. The two terms then share the token, and a check of the token alone
-- admits both; the holder tells them apart. A write that names no issuer (a direct guardedWrite
-- without the option) is checked by its token, as before.
DROP FUNCTION :CHECKED_FN(text, bigint, boolean, text, text);
CREATE FUNCTION :CHECKED_FN(p_resource text, p_token bigint, p_expect_raise boolean, p_fire_id text, p_lease text, p_issuer text) RETURNS void
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
  IF NOT FOUND OR cur.token IS DISTINCT FROM p_token OR cur.holder IS NULL OR cur.expires_at <= clock_timestamp()
     OR (p_issuer IS NOT NULL AND cur.holder IS DISTINCT FROM p_issuer) THEN
    RAISE EXCEPTION USING
      ERRCODE = 'FN004',
      MESSAGE = format('lease %L is not held by token %s%s (its holder is %s)', p_lease, p_token, coalesce(' of ' || quote_literal(p_issuer), ''), coalesce(quote_literal(cur.holder), 'none')),
      DETAIL = coalesce(cur.token::text, '');
  END IF;
END
$fn$;
