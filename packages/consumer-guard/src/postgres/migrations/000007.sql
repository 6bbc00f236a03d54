-- The check of a whole batch of fires in one call, answering a verdict per fire instead of raising,
-- for a queue that runs a batch of jobs in one transaction it holds (pg-boss's transactional
-- workers). Raising means a savepoint per job (so that one refusal leaves the batch's transaction
-- usable): a savepoint, the check and a release per job, where this is one statement for the batch.
-- Placeholders: :FENCES, :APPLIED, :CHECK_BATCH_FN.
--
-- The fires are judged in their order, as one after another in the transaction would be: a fire is
-- stale when its token is below the fence as the fires before it left it; otherwise it raises the
-- fence to its token and claims its fire id (duplicate when the resource already applied it, this
-- batch included). The lock is taken once, for the batch's highest token, by the rule of 000001.sql:
-- shared when the fence is already there (writers of one term go on in parallel), exclusive when the
-- batch raises it, held until the transaction ends. The transaction is announced with that highest
-- token (000003.sql): what the row will hold if it commits, so an election's advance above it ends it
-- and one at or below it does not (that advance is refused by the fence the batch commits).
CREATE FUNCTION :CHECK_BATCH_FN(p_resource text, p_tokens bigint[], p_fire_ids text[])
RETURNS TABLE (ord integer, verdict text, fence bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  n integer := coalesce(array_length(p_tokens, 1), 0);
  top bigint;
  cur bigint;
BEGIN
  IF n = 0 OR n <> coalesce(array_length(p_fire_ids, 1), 0) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a batch check takes one fire id per token, at least one';
  END IF;
  IF EXISTS (SELECT 1 FROM unnest(p_tokens) AS t(v) WHERE t.v IS NULL OR t.v < 1)
     OR EXISTS (SELECT 1 FROM unnest(p_fire_ids) AS f(v) WHERE f.v IS NULL) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fencing tokens must be positive bigints, fire ids present';
  END IF;
  SELECT max(t.v) INTO top FROM unnest(p_tokens) AS t(v);
  PERFORM set_config('application_name', 'fenced:' || top::text || ' ' || current_setting('application_name'), true);
  <<locked>>
  LOOP
    SELECT f.token INTO cur FROM :FENCES f WHERE f.resource = p_resource AND f.token >= top FOR SHARE;
    IF FOUND THEN EXIT locked; END IF;
    SELECT f.token INTO cur FROM :FENCES f WHERE f.resource = p_resource FOR UPDATE;
    IF FOUND THEN
      IF cur < top THEN
        UPDATE :FENCES f SET token = top, updated_at = now() WHERE f.resource = p_resource;
      END IF;
      EXIT locked;
    END IF;
    INSERT INTO :FENCES (resource, token) VALUES (p_resource, top) ON CONFLICT (resource) DO NOTHING;
    IF FOUND THEN
      cur := 0;
      EXIT locked;
    END IF;
  END LOOP;

  FOR i IN 1..n LOOP
    ord := i;
    IF p_tokens[i] < cur THEN
      verdict := 'stale';
    ELSE
      cur := p_tokens[i];
      INSERT INTO :APPLIED (resource, fire_id, token) VALUES (p_resource, p_fire_ids[i], p_tokens[i])
        ON CONFLICT (resource, fire_id) DO NOTHING;
      verdict := CASE WHEN FOUND THEN 'claimed' ELSE 'duplicate' END;
    END IF;
    fence := cur;
    RETURN NEXT;
  END LOOP;
END
$fn$;
