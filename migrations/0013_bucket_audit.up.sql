-- Bucket resets in the audit (issue 40, point 4).
--
-- An editor's ResetBucket (the hot keys' Reset, the inspector's "Clear the
-- log", "Free all leases", "Reset the count") gives a key back its whole
-- limit: a way past a limit that must not be quiet. permitd writes one row
-- per reset, before resetting (no row, no reset): who, when, which policy
-- and key, and the bucket as the inspector read it just before (old_value:
-- the admin API's Bucket in JSON: tokens, remaining, limit, the leases or
-- the log). new_value stays NULL: after a reset the bucket is full.
--
-- Only permitd writes here; there are no triggers (a bucket lives in
-- Redis, not in MySQL). The audit page lists it as kind 'bucket'
-- (stores/audit.c), filtered by policy like policy_audit.
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11.

CREATE TABLE bucket_audit (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  policy     VARCHAR(128) NOT NULL,
  bucket_key VARCHAR(1024) NOT NULL,
  action     VARCHAR(8) NOT NULL,
  actor      VARCHAR(128) NOT NULL,
  changed_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  old_value  TEXT NULL,
  new_value  TEXT NULL,
  PRIMARY KEY (id),
  KEY ix_bucket_audit_policy (policy, changed_at),
  KEY ix_bucket_audit_changed (changed_at),
  CONSTRAINT chk_bucket_audit_action CHECK (action IN ('reset'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
