-- Leases on MySQL/MariaDB: the lease rows and the procedures that grant, renew and release them, the
-- record of elections, the scheduler's record of fires, and lease groups' member lists, beside the
-- guard's fences in the same database.
-- A script in the mysql client's own form: statements end with $$ (the shared migrator splits on it),
-- so the procedures' bodies keep their semicolons. Placeholders (replaced with quoted, validated
-- identifiers by store/mysql/mysql-lease-migrator.ts):
--   :LEASES :TERMS :ELECTIONS :FIRES :MEMBERS
--   :ACQUIRE_PROC :RENEW_PROC :RELEASE_PROC :RECORD_ELECTION_PROC :RECORD_FIRES_PROC :BEAT_PROC
--   :FENCES  the guard's fence table in this database (it need not exist)
-- InnoDB only: the procedures rely on its row locks. Run again whole after a failure half way: tables
-- are created IF NOT EXISTS, each procedure is dropped before it is made.
--
-- Time. Every time is the server's clock as microseconds since the epoch, read as
-- TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)): UTC whatever the session's time zone
-- (a local time repeats an hour when daylight saving ends), and, inside a procedure, read when that
-- statement of the procedure starts. So each decision reads the clock in a statement of its own
-- AFTER the statement that waited for the row's lock: expiry is judged when the decision is made, not
-- when the call began (PostgreSQL's clock_timestamp() gives the same). Callers count their own
-- deadlines from when they sent the request.
-- SQLSTATE raised here: 22023 for arguments out of range.
DELIMITER $$

-- Lease names and node ids are kept as their bytes (VARBINARY: compared byte for byte, as the
-- assignment of a lease group sorts them).
--
-- Two rows per lease, because InnoDB has one exclusive row lock where PostgreSQL has two (FOR UPDATE,
-- and FOR NO KEY UPDATE, which a renew takes and a writer's FOR KEY SHARE does not block):
-- - the lease row (:LEASES): holder, token and expiry as they are now; renewals update it, and
--   nothing that writes data holds it;
-- - the term row (:TERMS): the term's token and holder, changed only when a term begins (the grant)
--   or ends (the release). What must not outlive the term holds it in share mode until it commits:
--   a lease-checked write (the guard's), a record of the scheduler's fires. A grant takes it
--   FOR UPDATE, so a new term begins only once every such write of the old term has ended; a renew
--   never touches it, so it never waits for them.
CREATE TABLE IF NOT EXISTS :LEASES (
  name VARBINARY(255) NOT NULL PRIMARY KEY,
  -- The last token minted for this lease; kept when the lease is released, so tokens only grow.
  token BIGINT NOT NULL,
  -- The holder's node id; NULL when free.
  holder VARBINARY(255) NULL,
  expires_us BIGINT NULL,
  granted_us BIGINT NULL,
  renewed_us BIGINT NULL
) ENGINE = InnoDB $$

CREATE TABLE IF NOT EXISTS :TERMS (
  name VARBINARY(255) NOT NULL PRIMARY KEY,
  -- The term's token; its holder's node id, NULL once released.
  token BIGINT NOT NULL,
  holder VARBINARY(255) NULL
) ENGINE = InnoDB $$

-- Takes the lease for p_ttl_ms when it is free or expired, minting its token in the same
-- transaction, above this lease's previous token and above every fence in the guard's table in this
-- database: no election here can mint a token a fence here already holds.
--
-- A live lease is answered from a plain read, which takes no lock: a standby's retries never queue
-- behind the leader's renewals or writes. A free or expired one is then locked FOR UPDATE, the term
-- row first (waiting for the old term's lease-checked writes and fire records to end: a frozen one
-- is ended by the caller, see mysql-lease-store.ts), then the lease row, and decided on the lease row
-- as the acquirer before it committed it (concurrent acquirers queue on the row locks).
-- Answers one row: won (0/1), token and holder ("<token>:<node>") as text, the milliseconds the
-- holder's lease has left, the server's clock.
DROP PROCEDURE IF EXISTS :ACQUIRE_PROC $$

CREATE PROCEDURE :ACQUIRE_PROC(IN p_name VARBINARY(255), IN p_node VARBINARY(255), IN p_ttl_ms BIGINT, IN p_wait_s INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_found BOOLEAN DEFAULT TRUE;
  DECLARE v_token BIGINT;
  DECLARE v_holder VARBINARY(255);
  DECLARE v_expires BIGINT;
  DECLARE v_now BIGINT;
  DECLARE v_fence BIGINT DEFAULT 0;
  DECLARE v_next BIGINT;
  -- The session's own lock wait, put back whatever happens: the grant waits p_wait_s at most
  -- (whole seconds: InnoDB counts no finer), then fails with 1205 and the caller answers not granted.
  DECLARE v_wait_was BIGINT DEFAULT @@SESSION.innodb_lock_wait_timeout;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = FALSE;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    SET SESSION innodb_lock_wait_timeout = v_wait_was;
    ROLLBACK;
    RESIGNAL;
  END;
  SET SESSION innodb_lock_wait_timeout = GREATEST(1, COALESCE(p_wait_s, v_wait_was));
  IF p_ttl_ms IS NULL OR p_ttl_ms < 1 OR COALESCE(LENGTH(p_node), 0) = 0 OR COALESCE(LENGTH(p_name), 0) = 0 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'acquire needs a lease name, a node id and a positive TTL';
  END IF;
  SELECT token, holder, expires_us INTO v_token, v_holder, v_expires FROM :LEASES WHERE name = p_name;
  SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  IF v_found AND v_holder IS NOT NULL AND v_expires > v_now THEN
    SELECT 0 AS won, CAST(v_token AS CHAR) AS token, CAST(CONCAT(v_token, ':', v_holder) AS CHAR CHARACTER SET utf8mb4) AS holder,
           CAST(CEILING((v_expires - v_now) / 1000) AS SIGNED) AS remaining_ms, CAST(v_now AS CHAR) AS now_us;
  ELSE
    START TRANSACTION;
    IF NOT v_found THEN
      INSERT IGNORE INTO :LEASES (name, token) VALUES (p_name, 0);
    END IF;
    -- The term row's first token is never read: a grant sets it before it commits. (Copied from the
    -- lease row by INSERT ... SELECT, it held that row in share mode under REPEATABLE READ until the
    -- FOR UPDATE below, and a renew queued between the two deadlocked with the election.)
    INSERT IGNORE INTO :TERMS (name, token) VALUES (p_name, 0);
    SET v_found = TRUE;
    SELECT token INTO v_next FROM :TERMS WHERE name = p_name FOR UPDATE;
    SELECT token, holder, expires_us INTO v_token, v_holder, v_expires FROM :LEASES WHERE name = p_name FOR UPDATE;
    -- Read once the row lock is ours: the moment the decision is made.
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    IF v_holder IS NOT NULL AND v_expires > v_now THEN
      -- Another acquirer won while this one waited.
      COMMIT;
      SELECT 0 AS won, CAST(v_token AS CHAR) AS token, CAST(CONCAT(v_token, ':', v_holder) AS CHAR CHARACTER SET utf8mb4) AS holder,
             CAST(CEILING((v_expires - v_now) / 1000) AS SIGNED) AS remaining_ms, CAST(v_now AS CHAR) AS now_us;
    ELSE
      BEGIN
        -- No fence table (the guard keeps its fences elsewhere, or was not migrated yet): nothing to mint above.
        DECLARE CONTINUE HANDLER FOR 1146 SET v_fence = 0;
        SELECT COALESCE(MAX(token), 0) INTO v_fence FROM :FENCES;
      END;
      -- At 2^63 - 1 the addition is out of range (error 1690): nothing is granted, nothing changes.
      SET v_next = GREATEST(v_token, v_fence) + 1;
      UPDATE :LEASES SET token = v_next, holder = p_node, expires_us = v_now + p_ttl_ms * 1000, granted_us = v_now, renewed_us = v_now WHERE name = p_name;
      UPDATE :TERMS SET token = v_next, holder = p_node WHERE name = p_name;
      COMMIT;
      SELECT 1 AS won, CAST(v_next AS CHAR) AS token, CAST(CONCAT(v_next, ':', p_node) AS CHAR CHARACTER SET utf8mb4) AS holder,
             p_ttl_ms AS remaining_ms, CAST(v_now AS CHAR) AS now_us;
    END IF;
  END IF;
  SET SESSION innodb_lock_wait_timeout = v_wait_was;
END $$

-- Extends leases to p_ttl_ms from now, each only for its holder with its very token and only while
-- it has not expired (an expired lease is free: extending it would grant it again without a token).
-- Many leases in one call, p_asked a JSON array of [name, token, node] (tokens as decimal text): a
-- process renews every lease it holds with one statement per tick. The asked rows are locked first,
-- then the clock is read, then they are extended: expiry is judged after any wait for a lock.
-- Answers one row per lease asked, by its position (ord, from 1): renewed (0/1), the server's clock.
DROP PROCEDURE IF EXISTS :RENEW_PROC $$

CREATE PROCEDURE :RENEW_PROC(IN p_asked LONGTEXT, IN p_ttl_ms BIGINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now BIGINT;
  DECLARE v_locked BIGINT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  IF p_ttl_ms IS NULL OR p_ttl_ms < 1 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'renew needs a positive TTL';
  END IF;
  IF p_asked IS NULL OR JSON_VALID(p_asked) = 0 OR JSON_TYPE(p_asked) <> 'ARRAY' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'renew: the leases asked must be a JSON array of [name, token, node]';
  END IF;
  START TRANSACTION;
  SELECT COUNT(*) INTO v_locked FROM :LEASES l
    JOIN JSON_TABLE(p_asked, '$[*]' COLUMNS (name VARCHAR(255) CHARACTER SET utf8mb4 PATH '$[0]')) a ON l.name = CONVERT(a.name USING binary)
     FOR UPDATE;
  SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  UPDATE :LEASES l
    JOIN JSON_TABLE(p_asked, '$[*]' COLUMNS (name VARCHAR(255) CHARACTER SET utf8mb4 PATH '$[0]', token BIGINT PATH '$[1]', node VARCHAR(255) CHARACTER SET utf8mb4 PATH '$[2]')) a
      ON l.name = CONVERT(a.name USING binary) AND l.token = a.token AND l.holder = CONVERT(a.node USING binary)
     SET l.expires_us = v_now + p_ttl_ms * 1000, l.renewed_us = v_now
   WHERE l.holder IS NOT NULL AND l.expires_us > v_now;
  -- A row renewed now holds this very time (its rows are locked by this transaction: nobody else
  -- could have set it in between).
  SELECT a.ord, (l.renewed_us <=> v_now AND l.token <=> a.token AND l.holder <=> CONVERT(a.node USING binary)) AS renewed, CAST(v_now AS CHAR) AS now_us
    FROM JSON_TABLE(p_asked, '$[*]' COLUMNS (ord FOR ORDINALITY, name VARCHAR(255) CHARACTER SET utf8mb4 PATH '$[0]', token BIGINT PATH '$[1]', node VARCHAR(255) CHARACTER SET utf8mb4 PATH '$[2]')) a
    LEFT JOIN :LEASES l ON l.name = CONVERT(a.name USING binary)
   ORDER BY a.ord;
  COMMIT;
END $$

-- Frees the lease if this holder still has it with this very token: the lease row (standbys see it
-- free at their next look) and the term row, which waits for the term's own lease-checked writes
-- still open (a leader stops its scheduler first: they are its last fires). The token stays: the
-- next mint is above it. Answers one row: released (0/1).
DROP PROCEDURE IF EXISTS :RELEASE_PROC $$

CREATE PROCEDURE :RELEASE_PROC(IN p_name VARBINARY(255), IN p_token BIGINT, IN p_node VARBINARY(255))
  MODIFIES SQL DATA
BEGIN
  DECLARE v_released BIGINT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  START TRANSACTION;
  UPDATE :TERMS SET holder = NULL WHERE name = p_name AND token = p_token AND holder = p_node;
  UPDATE :LEASES SET holder = NULL, expires_us = NULL WHERE name = p_name AND token = p_token AND holder = p_node;
  SET v_released = ROW_COUNT();
  COMMIT;
  SELECT v_released AS released;
END $$

-- The last elections of each lease, for fenced status and fenced doctor.
CREATE TABLE IF NOT EXISTS :ELECTIONS (
  lease VARBINARY(255) NOT NULL,
  token BIGINT NOT NULL,
  node VARBINARY(255) NOT NULL,
  ttl_ms BIGINT NOT NULL,
  fences INT NOT NULL,
  regressed BOOLEAN NOT NULL,
  at_us BIGINT NOT NULL,
  PRIMARY KEY (lease, token)
) ENGINE = InnoDB $$

-- Appends an election and keeps the newest p_keep of the lease.
DROP PROCEDURE IF EXISTS :RECORD_ELECTION_PROC $$

CREATE PROCEDURE :RECORD_ELECTION_PROC(IN p_lease VARBINARY(255), IN p_token BIGINT, IN p_node VARBINARY(255), IN p_ttl_ms BIGINT, IN p_fences INT, IN p_regressed BOOLEAN, IN p_keep INT)
  MODIFIES SQL DATA
BEGIN
  -- The newest kept is the first; the oldest kept, this many after it (a variable: LIMIT takes no expression).
  DECLARE v_skip INT DEFAULT GREATEST(COALESCE(p_keep, 1), 1) - 1;
  INSERT IGNORE INTO :ELECTIONS (lease, token, node, ttl_ms, fences, regressed, at_us)
  VALUES (p_lease, p_token, p_node, p_ttl_ms, p_fences, p_regressed, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
  DELETE FROM :ELECTIONS
   WHERE lease = p_lease
     AND token < (SELECT k.token FROM (SELECT token FROM :ELECTIONS WHERE lease = p_lease ORDER BY token DESC LIMIT 1 OFFSET v_skip) k);
END $$

-- The scheduler's record: per lease, the same fields as the Redis hash (store/fire-log.ts): a job's
-- last fire (epoch ms), ':dispatched:<job>', ':initialized', ':failover-gap'.
CREATE TABLE IF NOT EXISTS :FIRES (
  lease VARBINARY(255) NOT NULL,
  field VARBINARY(1024) NOT NULL,
  value BIGINT NOT NULL,
  PRIMARY KEY (lease, field)
) ENGINE = InnoDB $$

-- Records fires (or baselines: a null dispatch time) of several jobs in one call, p_fires a JSON
-- array of [job, scheduled, dispatched|null] (epoch ms), only while the caller holds the lease with
-- this very token and it has not expired by the server's clock when the check is made. The term row
-- is read LOCK IN SHARE MODE and held until the call commits, so no election can take the lease
-- between the check and the commit (an acquire's FOR UPDATE waits for it); the expiry is read from
-- the lease row without a lock (a renew never waits for a record). A job keeps its latest fire: an
-- equal or earlier one changes nothing.
-- Answers one row: recorded, 1 when recorded, 0 when the lease is not ours (nothing changed).
DROP PROCEDURE IF EXISTS :RECORD_FIRES_PROC $$

CREATE PROCEDURE :RECORD_FIRES_PROC(IN p_lease VARBINARY(255), IN p_token BIGINT, IN p_node VARBINARY(255), IN p_gap_ms BIGINT, IN p_fires LONGTEXT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_found BOOLEAN DEFAULT TRUE;
  DECLARE v_token BIGINT;
  DECLARE v_holder VARBINARY(255);
  DECLARE v_expires BIGINT;
  DECLARE v_now BIGINT;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = FALSE;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  IF p_fires IS NULL OR JSON_VALID(p_fires) = 0 OR JSON_TYPE(p_fires) <> 'ARRAY' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'record fires: the fires must be a JSON array of [job, scheduled, dispatched]';
  END IF;
  START TRANSACTION;
  SELECT token, holder INTO v_token, v_holder FROM :TERMS WHERE name = p_lease LOCK IN SHARE MODE;
  SELECT expires_us INTO v_expires FROM :LEASES WHERE name = p_lease AND token = p_token;
  SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  IF NOT v_found OR v_token <> p_token OR v_holder IS NULL OR v_holder <> p_node OR v_expires IS NULL OR v_expires <= v_now THEN
    ROLLBACK;
    SELECT 0 AS recorded;
  ELSE
    -- Each job's latest fire of this batch; its dispatch time is recorded only when that fire raises
    -- the job's record (read before the raise below).
    INSERT INTO :FIRES (lease, field, value)
    SELECT p_lease, CONVERT(CONCAT(':dispatched:', b.job) USING binary), b.dispatched
      FROM (SELECT x.job, x.scheduled, x.dispatched,
                   ROW_NUMBER() OVER (PARTITION BY x.job ORDER BY x.scheduled DESC) AS latest
              FROM JSON_TABLE(p_fires, '$[*]' COLUMNS (job VARCHAR(512) CHARACTER SET utf8mb4 PATH '$[0]', scheduled BIGINT PATH '$[1]', dispatched BIGINT PATH '$[2]')) x) b
      LEFT JOIN :FIRES f ON f.lease = p_lease AND f.field = CONVERT(b.job USING binary)
     WHERE b.latest = 1 AND b.dispatched IS NOT NULL AND (f.value IS NULL OR f.value < b.scheduled)
    ON DUPLICATE KEY UPDATE value = VALUES(value);
    INSERT INTO :FIRES (lease, field, value)
    SELECT p_lease, CONVERT(x.job USING binary), MAX(x.scheduled)
      FROM JSON_TABLE(p_fires, '$[*]' COLUMNS (job VARCHAR(512) CHARACTER SET utf8mb4 PATH '$[0]', scheduled BIGINT PATH '$[1]')) x
     GROUP BY x.job
    ON DUPLICATE KEY UPDATE value = GREATEST(value, VALUES(value));
    IF p_gap_ms IS NOT NULL THEN
      INSERT INTO :FIRES (lease, field, value) VALUES (p_lease, ':failover-gap', p_gap_ms)
      ON DUPLICATE KEY UPDATE value = VALUES(value);
    END IF;
    COMMIT;
    SELECT 1 AS recorded;
  END IF;
END $$

-- Lease groups' members: live until expires_us by the server's clock.
CREATE TABLE IF NOT EXISTS :MEMBERS (
  grp VARBINARY(255) NOT NULL,
  member VARBINARY(255) NOT NULL,
  expires_us BIGINT NOT NULL,
  PRIMARY KEY (grp, member)
) ENGINE = InnoDB $$

-- Keeps p_member live for p_ttl_ms and answers the live members, one row each in byte order (as the
-- assignment sorts them), with the microseconds each has left.
DROP PROCEDURE IF EXISTS :BEAT_PROC $$

CREATE PROCEDURE :BEAT_PROC(IN p_group VARBINARY(255), IN p_member VARBINARY(255), IN p_ttl_ms BIGINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now BIGINT;
  DECLARE v_members BIGINT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  IF p_ttl_ms IS NULL OR p_ttl_ms < 1 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'a heartbeat needs a positive TTL';
  END IF;
  START TRANSACTION;
  -- The group's rows locked first (by its primary key prefix), then the clock read.
  SELECT COUNT(*) INTO v_members FROM :MEMBERS WHERE grp = p_group FOR UPDATE;
  SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  DELETE FROM :MEMBERS WHERE grp = p_group AND expires_us <= v_now;
  INSERT INTO :MEMBERS (grp, member, expires_us) VALUES (p_group, p_member, v_now + p_ttl_ms * 1000)
  ON DUPLICATE KEY UPDATE expires_us = VALUES(expires_us);
  SELECT CAST(member AS CHAR CHARACTER SET utf8mb4) AS member, CAST(expires_us - v_now AS SIGNED) AS left_us
    FROM :MEMBERS WHERE grp = p_group ORDER BY member;
  COMMIT;
END $$
