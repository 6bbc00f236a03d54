-- The first outcome of a fire, beside its claim: a service that answers a retried request for a fire
-- it already applied (an HTTP service of @fenced/consumer-guard/http) gives back the first answer
-- instead of running the work again. Written in the fire's own transaction, before its COMMIT; null
-- for fires applied by writes that record none.
-- Placeholders: :APPLIED, the applied-fires table.
ALTER TABLE :APPLIED ADD COLUMN outcome text;
