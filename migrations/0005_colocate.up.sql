-- A policy may keep all of its buckets in one Redis Cluster slot (issue 19).
--
-- Since issue 19 each keyed bucket of a policy lives in a slot of its own
-- (P{NAME:KEY}:k), so one policy's buckets spread over every master of a
-- cluster. A policy with colocate = 1 keeps every bucket in the policy's
-- slot (P{NAME}:k:KEY, the layout of every keyed bucket before): what an
-- all_or_nothing AcquireBatch across its keys needs, at one node's
-- throughput. Off for every existing policy (README: Redis layout says what
-- that means for their buckets at upgrade). The sync copies it into the
-- policy's Redis hash as the field `colocate`.
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11.

ALTER TABLE policies ADD COLUMN colocate TINYINT(1) NOT NULL DEFAULT 0;
