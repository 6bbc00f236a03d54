-- The first outcome of a fire, beside its claim: a service that answers a retried request for a fire
-- it already applied (an HTTP service of @fenced/consumer-guard/http) gives back the first answer
-- instead of running the work again. Written in the fire's own transaction, before its COMMIT; NULL
-- for fires applied by writes that record none. MEDIUMTEXT: up to 16 MiB, more than any reply the
-- HTTP layer records; utf8mb4 whatever the table's default. Run again after a failure between this statement and its migration row, it
-- meets the column already there (error 1060), which the migrator takes as done.
DELIMITER $$

ALTER TABLE :APPLIED ADD COLUMN outcome MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL $$
