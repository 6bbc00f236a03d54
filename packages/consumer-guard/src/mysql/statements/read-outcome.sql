-- The claim of one fire and the outcome its write recorded (none when the fire was never applied).
-- Input: the resource, the fire id (its key is its SHA-256).
SELECT CAST(token AS CHAR) AS token, outcome, applied_at FROM :APPLIED WHERE resource = ? AND fire_key = UNHEX(SHA2(?, 256))
