-- Reservations (issue 38): a Reserve holds an estimate that a Commit
-- settles later with the real cost. Three limits per policy:
--
--   reserve_ttl_ms   the longest a reservation of this policy holds its
--                    estimate before it expires (a Reserve asking more, or
--                    nothing, gets this); default 5 minutes
--   debt_floor       how far below empty a Commit above its estimate may
--                    take a bucket (0: to empty, no debt); later requests
--                    wait the debt out
--   reserve_expiry   what an expired reservation's estimate does: 'keep'
--                    (the default, the safe one: the work may have run) or
--                    'refund'
--
-- The sync copies them into the policy's Redis hash (lua/sync.lua); every
-- edit of them is a policy edit, audited in policy_audit like the rest.
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11.

ALTER TABLE policies
  ADD COLUMN reserve_ttl_ms BIGINT NOT NULL DEFAULT 300000,
  ADD COLUMN debt_floor BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN reserve_expiry VARCHAR(8) NOT NULL DEFAULT 'keep';

ALTER TABLE policies
  ADD CONSTRAINT chk_policies_reserve CHECK (reserve_ttl_ms BETWEEN 1 AND 86400000 AND
                                             debt_floor BETWEEN 0 AND 1000000000000 AND
                                             reserve_expiry IN ('keep', 'refund'));
