-- Lease-checked writes (the guard's checkLease, with the MySQL lease store of @fenced/coordinator
-- beside the fences): the procedure a write calls after its fence check, in its own transaction.
-- :LEASE_TERMS and :LEASES are the lease store's tables (<table>_lease_terms, <table>_leases,
-- created by its own migration; until then a lease-checked write fails as not migrated).
-- Output: nothing; 45004 / FN004 when the lease is not held by this token (and, when p_issuer is
-- given, by that node) with time left by the server's clock; MESSAGE_TEXT: the lease's token, or ''.
-- The term row is read LOCK IN SHARE MODE and held until the write ends: a grant takes it FOR UPDATE,
-- so no new term begins while a write of the old one is open (the grant ends a frozen one after its
-- grace period). The expiry is read from the lease row without a lock, so renewals never wait for
-- writes: in a transaction whose snapshot is older (one the caller opened earlier), that read can only
-- show an earlier expiry (renewals only extend it), which refuses more, never less. The clock is
-- read after the lock wait, in a statement of its own.
DELIMITER $$

DROP PROCEDURE IF EXISTS :LEASE_CHECK_PROC $$

CREATE PROCEDURE :LEASE_CHECK_PROC(IN p_lease VARBINARY(255), IN p_token BIGINT, IN p_issuer VARBINARY(255))
  READS SQL DATA
BEGIN
  DECLARE v_found BOOLEAN DEFAULT TRUE;
  DECLARE v_token BIGINT DEFAULT NULL;
  DECLARE v_holder VARBINARY(255) DEFAULT NULL;
  DECLARE v_expires BIGINT DEFAULT NULL;
  DECLARE v_now BIGINT;
  DECLARE v_text VARCHAR(32);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = FALSE;
  IF COALESCE(LENGTH(p_lease), 0) = 0 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'a lease-checked write needs its lease name';
  END IF;
  SELECT token, holder INTO v_token, v_holder FROM :LEASE_TERMS WHERE name = p_lease LOCK IN SHARE MODE;
  IF v_found THEN
    SELECT expires_us INTO v_expires FROM :LEASES WHERE name = p_lease AND token = p_token AND holder = v_holder;
  END IF;
  SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  IF NOT v_found OR v_token <> p_token OR v_holder IS NULL OR (p_issuer IS NOT NULL AND v_holder <> p_issuer) OR v_expires IS NULL OR v_expires <= v_now THEN
    SET v_text = COALESCE(CAST(v_token AS CHAR), '');
    SIGNAL SQLSTATE 'FN004' SET MYSQL_ERRNO = 45004, MESSAGE_TEXT = v_text;
  END IF;
END $$
