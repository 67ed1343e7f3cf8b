-- Back to 0004: no policy keeps its buckets together any more. permitd
-- before issue 19 keeps every keyed bucket in its policy's slot anyway.
ALTER TABLE policies DROP COLUMN colocate;
