-- A policy chooses its limiting algorithm (issue 20): token_bucket (every
-- policy so far, and the default), fixed_window, sliding_window,
-- sliding_log or concurrency. stores/policy.h says what each means.
--
--   algorithm  the algorithm's name; existing rows become token buckets,
--              with no change in behaviour
--   rate       permits a second: a token bucket's only, NULL for the others
--   window_ms  the window of fixed_window, sliding_window and sliding_log,
--              in milliseconds (1 ms .. 400 days)
--   calendar   instead of window_ms, a fixed_window may align to the
--              calendar in UTC: 'minute', 'hour', 'day' or 'month'
--   lease_ms   a concurrency lease's time-to-live (1 ms .. 400 days)
--
-- The CHECK constraints hold each combination, so a row a DBA writes with
-- plain SQL is one the admin API would have accepted, and a refused one
-- names the rule it breaks. A sliding log keeps one entry per permit in
-- Redis: max_permits is capped at 10000 for it (POLICY_LOG_MAX_PERMITS).
-- The sync copies the columns into the policy's Redis hash (lua/sync.lua).
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11.

ALTER TABLE policies
  ADD COLUMN algorithm VARCHAR(16) NOT NULL DEFAULT 'token_bucket',
  ADD COLUMN window_ms BIGINT NULL,
  ADD COLUMN calendar  VARCHAR(8) NULL,
  ADD COLUMN lease_ms  BIGINT NULL,
  MODIFY rate DECIMAL(24,12) NULL;

ALTER TABLE policies
  ADD CONSTRAINT chk_policies_algorithm CHECK (algorithm IN
    ('token_bucket', 'fixed_window', 'sliding_window', 'sliding_log', 'concurrency')),
  ADD CONSTRAINT chk_policies_rate_only_token_bucket CHECK
    ((algorithm = 'token_bucket') = (rate IS NOT NULL)),
  ADD CONSTRAINT chk_policies_window_by_algorithm CHECK (CASE algorithm
    WHEN 'fixed_window' THEN (window_ms IS NULL) <> (calendar IS NULL)
    WHEN 'sliding_window' THEN window_ms IS NOT NULL AND calendar IS NULL
    WHEN 'sliding_log' THEN window_ms IS NOT NULL AND calendar IS NULL
    ELSE window_ms IS NULL AND calendar IS NULL END),
  ADD CONSTRAINT chk_policies_window_ms CHECK (window_ms BETWEEN 1 AND 34560000000),
  ADD CONSTRAINT chk_policies_calendar CHECK (calendar IN ('minute', 'hour', 'day', 'month')),
  ADD CONSTRAINT chk_policies_lease_only_concurrency CHECK
    ((algorithm = 'concurrency') = (lease_ms IS NOT NULL)),
  ADD CONSTRAINT chk_policies_lease_ms CHECK (lease_ms BETWEEN 1 AND 34560000000),
  ADD CONSTRAINT chk_policies_sliding_log_max_permits CHECK
    (algorithm <> 'sliding_log' OR max_permits <= 10000);
