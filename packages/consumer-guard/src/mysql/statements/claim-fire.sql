-- The fire claim on the shared path, in the write's transaction after the fence was read: no row
-- inserted means the resource already applied this fire (a concurrent claim of the same fire waits
-- for the first one's transaction on the primary key, then meets its row).
-- Input: the resource, the fire id (twice: its key is its SHA-256), the token.
INSERT IGNORE INTO :APPLIED (resource, fire_key, fire_id, token) VALUES (?, UNHEX(SHA2(?, 256)), ?, ?)
