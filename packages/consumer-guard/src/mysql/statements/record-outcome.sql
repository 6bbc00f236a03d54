-- A fire's outcome, recorded beside its claim in the write's own transaction, after the caller's
-- statements and before COMMIT (what a service answers when the fire's request comes again).
-- Input: the outcome text, the resource, the fire id (its key is its SHA-256).
UPDATE :APPLIED SET outcome = ? WHERE resource = ? AND fire_key = UNHEX(SHA2(?, 256))
