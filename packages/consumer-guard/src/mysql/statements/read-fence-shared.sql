-- The check's path for a write of the fence's own token (the common case: every write of a term
-- after its first). A locking read, first statement of the write's transaction: it sees the latest
-- committed fence whatever the isolation level, and shares the row until the write ends, so the
-- writes of one term run side by side and a raise (an exclusive lock) waits for all of them.
-- The token is compared by the guard; a token above the fence, or no fence yet, goes on to the check
-- procedure, which takes the row exclusively. Input: the resource. Output: the fence, as text.
SELECT CAST(token AS CHAR) AS token FROM :FENCES WHERE resource = ? LOCK IN SHARE MODE
