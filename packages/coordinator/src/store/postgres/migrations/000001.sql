-- Leases on PostgreSQL: the lease rows and the functions that grant, renew and release them, the
-- record of elections, the scheduler's record of fires, and lease groups' member lists.
-- Placeholders (replaced with quoted, validated identifiers by store/postgres/lease-migrator.ts):
--   :LEASES :ACQUIRE_FN :RENEW_FN :RELEASE_FN :RAISE_FN :ELECTIONS :RECORD_ELECTION_FN
--   :FIRES :RECORD_FIRES_FN :MEMBERS :BEAT_FN
--   :FENCES_NAME  the guard's fence table in this schema, as a text literal (it need not exist)
--   :CHANNEL      the NOTIFY channel of releases, as a text literal
-- Every time is the database server's clock (clock_timestamp(), read when the decision is made, not
-- when the transaction began). Callers count their own deadlines from when they sent the request.
-- SQLSTATE raised here: 22023 for arguments out of range.

CREATE TABLE :LEASES (
  name       text        PRIMARY KEY,
  -- The last token minted for this lease; kept when the lease is released, so tokens only grow.
  token      bigint      NOT NULL CHECK (token >= 0),
  -- The holder's node id; NULL when free.
  holder     text,
  expires_at timestamptz,
  granted_at timestamptz,
  renewed_at timestamptz
);

-- Takes the lease for p_ttl_ms when it is free or expired, minting its token in the same statement.
--
-- The token is above this lease's previous token and above every fence in this schema's fence table
-- (the guard's, when it lives here): no election can ever mint a token a fence already holds, so a
-- regression cannot happen against fences in this database (fences elsewhere still get the
-- election-time advance, which catches it).
--
-- Lock modes. A live lease is answered from an unlocked read: a standby's retries never queue
-- behind the leader's writes. A free or expired one is then locked FOR UPDATE, not with the
-- FOR NO KEY UPDATE a plain UPDATE takes: FOR UPDATE waits for every transaction holding
-- FOR KEY SHARE on the row (a guarded write that checks its lease in its own transaction, the
-- guard's lease check), so the new term is granted only after every write of the old one has
-- committed or rolled back; a renew's UPDATE changes no key column, takes FOR NO KEY UPDATE, and so
-- never waits for those writes. Concurrent acquirers queue on the row lock and each decides on the
-- row as the one before it committed it.
--
-- A deposed leader frozen inside such a write (SIGSTOP, a hung VM) would hold the election off for
-- as long as it is frozen. So the lock is waited for p_grace_ms at a time: after each wait, the
-- lease-checked writes of this lease that announced a token of an expired term (at most the token
-- read above; guard migration 000004 announces "fenced:<token> lease:<tag>" in application_name)
-- are ended with pg_terminate_backend, and after p_takeover_ms in all the acquire gives up: it
-- answers not granted, with no time left and the count of writes it ended (the caller retries at
-- once, and finds the row free). Nothing of a newer term, nothing that did not announce itself, and nothing of
-- another lease is ever ended.
CREATE FUNCTION :ACQUIRE_FN(p_name text, p_node text, p_ttl_ms bigint, p_grace_ms bigint DEFAULT 250, p_takeover_ms bigint DEFAULT 10000)
RETURNS TABLE (won boolean, token text, holder text, remaining_ms bigint, now_us bigint, ended integer)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  cur record;
  seen bigint;
  v_now timestamptz;
  v_fence bigint := 0;
  v_token bigint;
  v_giveup timestamptz;
  v_lock_timeout text := current_setting('lock_timeout');
  v_tag text := 'lease:' || substr(md5(p_name), 1, 12);
BEGIN
  IF p_ttl_ms IS NULL OR p_ttl_ms < 1 OR coalesce(p_node, '') = '' OR coalesce(p_name, '') = '' OR p_grace_ms < 1 OR p_takeover_ms < 0 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'acquire needs a lease name, a node id, a positive TTL and grace period';
  END IF;
  ended := 0;
  SELECT l.token, l.holder, l.expires_at INTO cur FROM :LEASES l WHERE l.name = p_name;
  IF NOT FOUND THEN
    INSERT INTO :LEASES (name, token) VALUES (p_name, 0) ON CONFLICT (name) DO NOTHING;
    seen := 0;
  ELSIF cur.holder IS NOT NULL AND cur.expires_at > clock_timestamp() THEN
    v_now := clock_timestamp();
    won := false;
    token := cur.token::text;
    holder := cur.token::text || ':' || cur.holder;
    remaining_ms := ceil(extract(epoch FROM cur.expires_at - v_now) * 1000)::bigint;
    now_us := floor(extract(epoch FROM v_now) * 1000000)::bigint;
    RETURN NEXT;
    RETURN;
  ELSE
    seen := cur.token;
  END IF;
  v_giveup := clock_timestamp() + p_takeover_ms * interval '1 millisecond';
  LOOP
    BEGIN
      -- A grace period at a time, never past the give-up time (a short lease has a short budget).
      PERFORM set_config('lock_timeout', greatest(1, least(p_grace_ms, ceil(extract(epoch FROM v_giveup - clock_timestamp()) * 1000)))::bigint || 'ms', true);
      SELECT l.token, l.holder, l.expires_at INTO STRICT cur FROM :LEASES l WHERE l.name = p_name FOR UPDATE;
      EXIT;
    EXCEPTION WHEN lock_not_available THEN
      -- Ended before giving up: the next attempt then finds the row free.
      SELECT ended + count(*) FILTER (WHERE pg_terminate_backend(a.pid)) INTO ended
        FROM pg_stat_activity a
       WHERE a.pid <> pg_backend_pid()
         AND strpos(a.application_name, v_tag) > 0
         AND substring(a.application_name FROM '^fenced:([0-9]{1,19})(?: |$)')::numeric <= seen;
      IF clock_timestamp() >= v_giveup THEN
        -- Not granted this time; the caller tries again at once (no time left), and hears what was ended.
        PERFORM set_config('lock_timeout', v_lock_timeout, true);
        won := false;
        token := seen::text;
        holder := NULL;
        remaining_ms := 0;
        now_us := floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
        RETURN NEXT;
        RETURN;
      END IF;
    END;
  END LOOP;
  PERFORM set_config('lock_timeout', v_lock_timeout, true);
  -- Read once the row lock is ours: the moment the decision is made.
  v_now := clock_timestamp();
  now_us := floor(extract(epoch FROM v_now) * 1000000)::bigint;
  IF cur.holder IS NOT NULL AND cur.expires_at > v_now THEN
    -- Another acquirer won while this one waited.
    won := false;
    token := cur.token::text;
    holder := cur.token::text || ':' || cur.holder;
    remaining_ms := ceil(extract(epoch FROM cur.expires_at - v_now) * 1000)::bigint;
    RETURN NEXT;
    RETURN;
  END IF;
  IF to_regclass(:FENCES_NAME) IS NOT NULL THEN
    EXECUTE format('SELECT coalesce(max(token), 0) FROM %s', :FENCES_NAME) INTO v_fence;
  END IF;
  v_token := greatest(cur.token, v_fence) + 1;
  UPDATE :LEASES l
     SET token = v_token, holder = p_node, expires_at = v_now + p_ttl_ms * interval '1 millisecond', granted_at = v_now, renewed_at = v_now
   WHERE l.name = p_name;
  won := true;
  token := v_token::text;
  holder := v_token::text || ':' || p_node;
  remaining_ms := p_ttl_ms;
  RETURN NEXT;
END
$fn$;

-- Extends leases to p_ttl_ms from now, each only for its holder with its very token and only while
-- it has not expired (an expired lease is free: extending it would grant it again without a token).
-- Many leases in one call: a process renews every lease it holds with one statement per tick (a
-- lease group of 1,000 leases does not send 1,000). Answers one row per lease asked, by its position.
CREATE FUNCTION :RENEW_FN(p_names text[], p_tokens bigint[], p_nodes text[], p_ttl_ms bigint)
RETURNS TABLE (ord bigint, renewed boolean, now_us bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  IF p_ttl_ms IS NULL OR p_ttl_ms < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'renew needs a positive TTL';
  END IF;
  IF cardinality(p_names) IS DISTINCT FROM cardinality(p_tokens) OR cardinality(p_names) IS DISTINCT FROM cardinality(p_nodes) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'renew: names, tokens and node ids must pair up';
  END IF;
  -- The asked rows locked first (in name order, as every batch locks them), then judged and extended
  -- by the clock read after any wait. In the statement that waits, PostgreSQL evaluates a row's
  -- conditions and new values before it waits for the row, and again only when the row changed
  -- meanwhile, not when it was only locked: a lease that ran out during the wait was extended.
  PERFORM 1 FROM :LEASES l WHERE l.name = ANY (p_names) ORDER BY l.name FOR NO KEY UPDATE;
  RETURN QUERY
    WITH asked AS (
      SELECT u.name, u.token, u.node, u.ord FROM unnest(p_names, p_tokens, p_nodes) WITH ORDINALITY AS u(name, token, node, ord)
    ), done AS (
      UPDATE :LEASES l
         SET expires_at = clock_timestamp() + p_ttl_ms * interval '1 millisecond', renewed_at = clock_timestamp()
        FROM asked a
       WHERE l.name = a.name AND l.token = a.token AND l.holder = a.node AND l.expires_at > clock_timestamp()
      RETURNING a.ord
    )
    SELECT a.ord, EXISTS (SELECT 1 FROM done d WHERE d.ord = a.ord), floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint
      FROM asked a;
END
$fn$;

-- Frees the lease if this holder still has it with this very token, and wakes the standbys: the
-- notification is delivered when this statement commits. The token stays: the next mint is above it.
CREATE FUNCTION :RELEASE_FN(p_name text, p_token bigint, p_node text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  UPDATE :LEASES l SET holder = NULL, expires_at = NULL
   WHERE l.name = p_name AND l.token = p_token AND l.holder = p_node;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pg_notify(:CHANNEL, p_name);
  RETURN true;
END
$fn$;

-- Raises the lease's token to at least p_floor: a fence elsewhere holds a token this store never
-- minted (a deployment that moved here from Redis, or a database restored from an older backup).
CREATE FUNCTION :RAISE_FN(p_name text, p_floor bigint) RETURNS void
LANGUAGE sql VOLATILE AS $fn$
  INSERT INTO :LEASES AS l (name, token) VALUES (p_name, p_floor)
  ON CONFLICT (name) DO UPDATE SET token = greatest(l.token, EXCLUDED.token);
$fn$;

-- The last elections of each lease, for fenced status and fenced doctor.
CREATE TABLE :ELECTIONS (
  lease     text        NOT NULL,
  token     bigint      NOT NULL,
  node      text        NOT NULL,
  ttl_ms    bigint      NOT NULL,
  fences    integer     NOT NULL,
  regressed boolean     NOT NULL,
  at        timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (lease, token)
);

-- Appends an election and keeps the newest p_keep of the lease.
CREATE FUNCTION :RECORD_ELECTION_FN(p_lease text, p_token bigint, p_node text, p_ttl_ms bigint, p_fences integer, p_regressed boolean, p_keep integer)
RETURNS void LANGUAGE sql VOLATILE AS $fn$
  INSERT INTO :ELECTIONS (lease, token, node, ttl_ms, fences, regressed) VALUES (p_lease, p_token, p_node, p_ttl_ms, p_fences, p_regressed)
  ON CONFLICT (lease, token) DO NOTHING;
  DELETE FROM :ELECTIONS e
   WHERE e.lease = p_lease
     AND e.token < (SELECT k.token FROM :ELECTIONS k WHERE k.lease = p_lease ORDER BY k.token DESC OFFSET p_keep - 1 LIMIT 1);
$fn$;

-- The scheduler's record: per lease, the same fields as the Redis hash (store/fire-log.ts): a job's
-- last fire (epoch ms), ':dispatched:<job>', ':initialized', ':failover-gap'.
CREATE TABLE :FIRES (
  lease text   NOT NULL,
  field text   NOT NULL,
  value bigint NOT NULL,
  PRIMARY KEY (lease, field)
);

-- Records fires (or baselines: a NULL dispatch time) of several jobs in one call, only while the
-- caller holds the lease with this very token and it has not expired by the server's clock. The lease
-- row is held FOR KEY SHARE until the call commits, so no election can take the lease between the
-- check and the commit (an acquire waits for it: see :ACQUIRE_FN). A job keeps its latest fire: an
-- equal or earlier one changes nothing.
-- Returns 1 when recorded, 0 when the lease is not ours (nothing changed).
CREATE FUNCTION :RECORD_FIRES_FN(p_lease text, p_token bigint, p_node text, p_gap_ms bigint, p_jobs text[], p_scheduled bigint[], p_dispatched bigint[])
RETURNS integer LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  IF cardinality(p_jobs) IS DISTINCT FROM cardinality(p_scheduled) OR cardinality(p_jobs) IS DISTINCT FROM cardinality(p_dispatched)
     OR array_position(p_scheduled, NULL) IS NOT NULL OR array_position(p_jobs, NULL) IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'record fires: jobs, scheduled times and dispatch times must pair up';
  END IF;
  PERFORM 1 FROM :LEASES l WHERE l.name = p_lease AND l.token = p_token AND l.holder = p_node FOR KEY SHARE;
  IF NOT FOUND THEN
    RETURN 0;
  END IF;
  -- Judged once the row is held, in a statement of its own: in the statement that waits for the row,
  -- the clock would be read before the wait (see :RENEW_FN).
  PERFORM 1 FROM :LEASES l WHERE l.name = p_lease AND l.token = p_token AND l.holder = p_node AND l.expires_at > clock_timestamp();
  IF NOT FOUND THEN
    RETURN 0;
  END IF;
  WITH batch AS (
    SELECT DISTINCT ON (u.job) u.job, u.scheduled, u.dispatched
      FROM unnest(p_jobs, p_scheduled, p_dispatched) AS u(job, scheduled, dispatched)
     ORDER BY u.job, u.scheduled DESC
  ), raised AS (
    INSERT INTO :FIRES AS f (lease, field, value)
    SELECT p_lease, b.job, b.scheduled FROM batch b
    ON CONFLICT (lease, field) DO UPDATE SET value = EXCLUDED.value WHERE f.value < EXCLUDED.value
    RETURNING f.field
  )
  INSERT INTO :FIRES AS f (lease, field, value)
  SELECT p_lease, ':dispatched:' || b.job, b.dispatched FROM batch b JOIN raised r ON r.field = b.job
   WHERE b.dispatched IS NOT NULL
  ON CONFLICT (lease, field) DO UPDATE SET value = EXCLUDED.value;
  IF p_gap_ms IS NOT NULL THEN
    INSERT INTO :FIRES AS f (lease, field, value) VALUES (p_lease, ':failover-gap', p_gap_ms)
    ON CONFLICT (lease, field) DO UPDATE SET value = EXCLUDED.value;
  END IF;
  RETURN 1;
END
$fn$;

-- Lease groups' members: live until expires_at by the server's clock.
CREATE TABLE :MEMBERS (
  grp        text        NOT NULL,
  member     text        NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (grp, member)
);

-- Keeps p_member live for p_ttl_ms and returns the live members (sorted by byte order, as the
-- assignment sorts them) and after how many ms the first other member expires (-1: none).
CREATE FUNCTION :BEAT_FN(p_group text, p_member text, p_ttl_ms bigint)
RETURNS TABLE (members text[], next_expiry_ms bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  v_now timestamptz := clock_timestamp();
BEGIN
  IF p_ttl_ms IS NULL OR p_ttl_ms < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a heartbeat needs a positive TTL';
  END IF;
  DELETE FROM :MEMBERS m WHERE m.grp = p_group AND m.expires_at <= v_now;
  INSERT INTO :MEMBERS AS m (grp, member, expires_at) VALUES (p_group, p_member, v_now + p_ttl_ms * interval '1 millisecond')
  ON CONFLICT (grp, member) DO UPDATE SET expires_at = EXCLUDED.expires_at;
  RETURN QUERY
    SELECT array_agg(m.member ORDER BY m.member COLLATE "C"),
           coalesce(min(ceil(extract(epoch FROM m.expires_at - v_now) * 1000)::bigint) FILTER (WHERE m.member <> p_member), -1)
      FROM :MEMBERS m WHERE m.grp = p_group;
END
$fn$;
