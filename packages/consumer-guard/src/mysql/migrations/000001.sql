-- The MySQL/MariaDB fence store: one fence row per resource, the record of applied fires, the audit
-- of deliberate lowerings, and the two procedures every guarded write and every election call.
-- A script in the mysql client's own form: statements end with $$ (the migrator splits on it), so
-- the procedures' bodies keep their semicolons. :NAMES are replaced by the installation's quoted
-- names. InnoDB only: the check relies on its row locks. A migration that stopped half way is run
-- again whole: tables are created IF NOT EXISTS, each procedure is dropped before it is made.
DELIMITER $$

-- Resources and fire ids are kept as their UTF-8 bytes (VARBINARY: compared byte for byte, as
-- PostgreSQL's COLLATE "C" does), sized for the longest the guard accepts: a resource of 1024 bytes,
-- a fire id of 512 characters. A fire is keyed by the SHA-256 of its id, which keeps the applied
-- fires' primary key within InnoDB's 3072-byte limit for any fire id.
CREATE TABLE IF NOT EXISTS :FENCES (
  resource VARBINARY(1024) NOT NULL PRIMARY KEY,
  token BIGINT NOT NULL,
  updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)
) ENGINE = InnoDB $$

CREATE TABLE IF NOT EXISTS :APPLIED (
  resource VARBINARY(1024) NOT NULL,
  fire_key BINARY(32) NOT NULL,
  fire_id VARBINARY(2048) NOT NULL,
  token BIGINT NOT NULL,
  applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (resource, fire_key),
  KEY applied_at (applied_at)
) ENGINE = InnoDB $$

CREATE TABLE IF NOT EXISTS :AUDIT (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  resource VARBINARY(1024) NOT NULL,
  from_token BIGINT NULL,
  to_token BIGINT NOT NULL,
  actor VARCHAR(255) NOT NULL,
  reason TEXT NOT NULL,
  at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  KEY resource (resource, id)
) ENGINE = InnoDB $$

-- The check of every guarded write, its first statement inside the write's own transaction.
-- Input: the resource, the write's token, whether the caller expects this write to raise the fence
-- (a hint: the token is above the last fence it saw), the fire id to claim (or NULL).
-- Output: nothing; a refusal is a SIGNAL the guard maps by its error number (never its text):
--   45001 / FN001 stale token, MESSAGE_TEXT the fence (decimal digits only);
--   45003 / FN003 the resource already applied this fire.
-- Both paths read the fence with a locking read, which sees the latest committed fence whatever the
-- transaction's isolation (a plain SELECT under REPEATABLE READ reads the transaction's snapshot),
-- and hold the lock until the write commits or rolls back:
-- - a write of the fence's own token shares the row (LOCK IN SHARE MODE, which MySQL 8 and MariaDB
--   both accept), so the writes of one term run side by side, and a raise waits for all of them;
-- - a write that raises takes the row exclusively; an absent row is inserted and locked in the same
--   statement (an insert that meets the row takes its exclusive lock), so the first writes of a new
--   resource serialize on it rather than deadlocking over gap locks.
-- A wrong hint costs at most a lock upgrade (two upgraders deadlock; InnoDB aborts one, errno 1213,
-- and the guard runs it again), never correctness.
DROP PROCEDURE IF EXISTS :CHECK_PROC $$

CREATE PROCEDURE :CHECK_PROC(IN p_resource VARBINARY(1024), IN p_token BIGINT, IN p_raises BOOLEAN, IN p_fire_id VARBINARY(2048))
  MODIFIES SQL DATA
BEGIN
  DECLARE v_highest BIGINT DEFAULT NULL;
  DECLARE v_text VARCHAR(32);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_highest = NULL;
  IF p_token IS NULL OR p_token < 1 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencing token must be a positive bigint';
  END IF;
  IF NOT p_raises THEN
    SELECT token INTO v_highest FROM :FENCES WHERE resource = p_resource LOCK IN SHARE MODE;
  END IF;
  IF v_highest IS NULL THEN
    INSERT INTO :FENCES (resource, token) VALUES (p_resource, p_token) ON DUPLICATE KEY UPDATE token = token;
    SELECT token INTO v_highest FROM :FENCES WHERE resource = p_resource FOR UPDATE;
  END IF;
  IF p_token < v_highest THEN
    SET v_text = CAST(v_highest AS CHAR);
    SIGNAL SQLSTATE 'FN001' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_text;
  END IF;
  IF p_token > v_highest THEN
    UPDATE :FENCES SET token = p_token WHERE resource = p_resource;
  END IF;
  IF p_fire_id IS NOT NULL THEN
    -- Two claims of one fire meet on its primary key: the second waits for the first one's
    -- transaction, then meets its row here (or claims it, when the first rolled back).
    INSERT IGNORE INTO :APPLIED (resource, fire_key, fire_id, token) VALUES (p_resource, UNHEX(SHA2(p_fire_id, 256)), p_fire_id, p_token);
    IF ROW_COUNT() = 0 THEN
      SIGNAL SQLSTATE 'FN003' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = 'fire already applied';
    END IF;
  END IF;
END $$

-- The strict raise an election makes: the fence goes to p_token only when it is below it.
-- Output: nothing; 45002 / FN002 when the fence is already there or above (MESSAGE_TEXT: the fence).
-- An absent row is inserted; two first advances that meet on the gap lock of a missing row end in
-- a deadlock (1213) or a duplicate key (1062, under READ COMMITTED), which the caller runs again.
DROP PROCEDURE IF EXISTS :ADVANCE_PROC $$

CREATE PROCEDURE :ADVANCE_PROC(IN p_resource VARBINARY(1024), IN p_token BIGINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_highest BIGINT DEFAULT NULL;
  DECLARE v_text VARCHAR(32);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_highest = NULL;
  IF p_token IS NULL OR p_token < 1 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencing token must be a positive bigint';
  END IF;
  SELECT token INTO v_highest FROM :FENCES WHERE resource = p_resource FOR UPDATE;
  IF v_highest IS NULL THEN
    INSERT INTO :FENCES (resource, token) VALUES (p_resource, p_token);
  ELSEIF v_highest >= p_token THEN
    SET v_text = CAST(v_highest AS CHAR);
    SIGNAL SQLSTATE 'FN002' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_text;
  ELSE
    UPDATE :FENCES SET token = p_token WHERE resource = p_resource;
  END IF;
END $$

-- The audited lowering of a fence (recovery from a poisoned fence; the library never lowers one by
-- itself): the fence set to p_token and the act written to the audit table in one transaction.
-- Output: one row, previous, the fence before (NULL when there was none), as text.
DROP PROCEDURE IF EXISTS :LOWER_PROC $$

CREATE PROCEDURE :LOWER_PROC(IN p_resource VARBINARY(1024), IN p_token BIGINT, IN p_actor VARCHAR(255), IN p_reason TEXT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_previous BIGINT DEFAULT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_previous = NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  IF p_token IS NULL OR p_token < 1 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencing token must be a positive bigint';
  END IF;
  IF COALESCE(CHAR_LENGTH(TRIM(p_actor)), 0) = 0 OR COALESCE(CHAR_LENGTH(TRIM(p_reason)), 0) = 0 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'lowering a fence needs an actor and a reason';
  END IF;
  START TRANSACTION;
  SELECT token INTO v_previous FROM :FENCES WHERE resource = p_resource FOR UPDATE;
  INSERT INTO :FENCES (resource, token) VALUES (p_resource, p_token) ON DUPLICATE KEY UPDATE token = VALUES(token);
  INSERT INTO :AUDIT (resource, from_token, to_token, actor, reason) VALUES (p_resource, v_previous, p_token, p_actor, p_reason);
  COMMIT;
  SELECT CAST(v_previous AS CHAR) AS previous;
END $$
