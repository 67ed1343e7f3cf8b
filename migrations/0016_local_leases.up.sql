-- A policy's own local leases (issue 41; docs/algorithms.md "Local
-- leases"): whether an instance may grant a hot bucket's permits from a
-- lease it took from the bucket in Redis beforehand, and how many a lease
-- takes.
--
--   local_lease          'off', 'on' (every bucket leased from its first
--                        Acquire) or 'auto' (a bucket one worker decides
--                        at --local-lease-auto-rate or more); NULL (every
--                        existing row, and the default): as the instance's
--                        --local-leases says
--   local_lease_permits  the permits a lease takes; NULL: as
--                        --local-lease-permits says (0: sized by traffic)
--
-- Only token_bucket and fixed_window policies are leased; the setting is
-- kept, and unused, for the other algorithms. The sync copies both into
-- the policy's Redis hash (lua/sync.lua) when they are not NULL.
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11.

ALTER TABLE policies
  ADD COLUMN local_lease VARCHAR(4) NULL DEFAULT NULL,
  ADD COLUMN local_lease_permits INT UNSIGNED NULL DEFAULT NULL;

ALTER TABLE policies
  ADD CONSTRAINT chk_policies_local_lease CHECK (local_lease IN ('off', 'on', 'auto')),
  ADD CONSTRAINT chk_policies_local_lease_permits
    CHECK (local_lease_permits BETWEEN 1 AND 1000000);
