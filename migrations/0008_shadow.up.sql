-- A policy may run in shadow mode (issue 23): every decision is made and
-- counted as usual, but the answer always allows; the reply and the
-- RateLimit headers still say what would have been decided, so a team can
-- watch "would have denied N" before a new limit bites.
--
--   shadow  1 while the policy only observes; 0 (every existing row, and
--           the default) while it enforces
--
-- The sync copies it into the policy's Redis hash (lua/sync.lua).
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11.

ALTER TABLE policies
  ADD COLUMN shadow TINYINT(1) NOT NULL DEFAULT 0;

ALTER TABLE policies
  ADD CONSTRAINT chk_policies_shadow CHECK (shadow IN (0, 1));
