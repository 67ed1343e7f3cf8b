-- Overrides (issue 37): one policy, other limits for the callers who need
-- them. A row belongs to a policy (by name, as gateway rules name one: not
-- a foreign key) and matches a caller by
--   match_kind 'key'     the bucket key is exactly match_value
--              'prefix'  the bucket key starts with match_value (the UI
--                        shows `premium_*`; the longest prefix wins)
--              'app'     the calling app is match_value
-- Precedence: exact key over longest prefix over app over the policy.
-- It does one of
--   action 'limit'   the policy's algorithm with other numbers:
--                    max_permits, rate (token_bucket, permits a second),
--                    window_ms (fixed/sliding windows, sliding_log: the
--                    window; concurrency: the lease); NULL = the
--                    policy's own number. A number the policy's algorithm
--                    has none of is ignored (the engine logs it once).
--          'block'   nothing is allowed: a denial that says so
--          'exempt'  always allowed, and still counted
-- expires_at: NULL never; once past, the row is out of force (kept for the
-- record until someone deletes it).
--
-- version grows on every UPDATE (edits send the version they started
-- from). Every change, by the admin API (which sets @permitd_actor) or by
-- plain SQL (actor USER()), is a row of override_audit with the row before
-- and after, and a plain-SQL change names its MySQL user in created_by /
-- updated_by, as 0009 does for policies.
--
-- policy_override_changes counts, per policy name, the changes of its
-- overrides (every INSERT, UPDATE, DELETE): permitd adds it to the
-- policy's version stamp (lua/bucket.lua), so a bucket written under an
-- override set is never decided again under an older one (the scripts'
-- "stale" answer), whichever row changed, even a deleted one.
--
-- envoy_descriptors.allow_limit_override: 1 lets a matching descriptor's
-- own `limit` (requests_per_unit, unit) and `unlimited` override the
-- policy for that request; 0 (the default): ignored, since a caller must
-- not be able to raise its own limit.
--
-- permitd loads the overrides into every instance's memory (each sync
-- interval, and at once on a PUBLISH of the policy's name on
-- <prefix>override-changes, which the admin API sends after a write).
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11 (and in the stock mysql
-- client: DELIMITER lines).

CREATE TABLE policy_overrides (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  policy      VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  match_kind  VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  match_value VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  action      VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'limit',
  max_permits BIGINT NULL,
  rate        DECIMAL(24,12) NULL,
  window_ms   BIGINT NULL,
  expires_at  DATETIME(6) NULL,
  description VARCHAR(1024) NOT NULL DEFAULT '',
  version     BIGINT UNSIGNED NOT NULL DEFAULT 1,
  created_by  VARCHAR(128) NOT NULL DEFAULT '',
  updated_by  VARCHAR(128) NOT NULL DEFAULT '',
  created_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uq_policy_overrides (policy, match_kind, match_value),
  KEY ix_policy_overrides_match (match_kind, match_value),
  CONSTRAINT chk_policy_overrides_policy
    CHECK (policy REGEXP '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
  CONSTRAINT chk_policy_overrides_kind CHECK (match_kind IN ('key', 'prefix', 'app')),
  CONSTRAINT chk_policy_overrides_value CHECK (match_value <> ''),
  CONSTRAINT chk_policy_overrides_action CHECK (action IN ('limit', 'block', 'exempt')),
  CONSTRAINT chk_policy_overrides_limits CHECK
    ((action = 'limit' AND (max_permits IS NOT NULL OR rate IS NOT NULL OR window_ms IS NOT NULL))
     OR (action <> 'limit' AND max_permits IS NULL AND rate IS NULL AND window_ms IS NULL)),
  CONSTRAINT chk_policy_overrides_max_permits CHECK (max_permits >= 1),
  CONSTRAINT chk_policy_overrides_rate CHECK (rate > 0),
  CONSTRAINT chk_policy_overrides_window_ms CHECK (window_ms BETWEEN 1 AND 34560000000)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE override_audit (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  override_id BIGINT UNSIGNED NOT NULL,
  policy      VARCHAR(128) NOT NULL,
  action      VARCHAR(8) NOT NULL,
  actor       VARCHAR(128) NOT NULL,
  changed_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  old_value   TEXT NULL,
  new_value   TEXT NULL,
  PRIMARY KEY (id),
  KEY ix_override_audit_policy (policy, changed_at),
  KEY ix_override_audit_override (override_id, changed_at),
  KEY ix_override_audit_changed (changed_at),
  CONSTRAINT chk_override_audit_action CHECK (action IN ('create', 'update', 'delete'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE policy_override_changes (
  policy  VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  changes BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (policy)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TRIGGER trg_policy_overrides_by_insert BEFORE INSERT ON policy_overrides FOR EACH ROW
  SET NEW.created_by = IF(@permitd_actor IS NULL, LEFT(USER(), 128), NEW.created_by),
      NEW.updated_by = IF(@permitd_actor IS NULL, LEFT(USER(), 128), NEW.updated_by),
      NEW.version = 1;

-- version grows on every change, whoever makes it.
CREATE TRIGGER trg_policy_overrides_version BEFORE UPDATE ON policy_overrides FOR EACH ROW
  SET NEW.version = OLD.version + 1,
      NEW.updated_by = IF(@permitd_actor IS NULL, LEFT(USER(), 128), NEW.updated_by);

DELIMITER ;;

CREATE TRIGGER trg_policy_overrides_audit_insert AFTER INSERT ON policy_overrides FOR EACH ROW
BEGIN
  INSERT INTO policy_override_changes (policy, changes) VALUES (NEW.policy, 1)
    ON DUPLICATE KEY UPDATE changes = changes + 1;
  INSERT INTO override_audit (override_id, policy, action, actor, old_value, new_value)
  VALUES (NEW.id, NEW.policy, 'create', IFNULL(@permitd_actor, LEFT(USER(), 128)), NULL,
          JSON_OBJECT('policy', NEW.policy, 'match_kind', NEW.match_kind,
                      'match_value', NEW.match_value, 'action', NEW.action,
                      'max_permits', NEW.max_permits, 'rate', NEW.rate,
                      'window_ms', NEW.window_ms, 'expires_at', NEW.expires_at,
                      'description', NEW.description, 'version', NEW.version));
END;;

CREATE TRIGGER trg_policy_overrides_audit_update AFTER UPDATE ON policy_overrides FOR EACH ROW
BEGIN
  INSERT INTO policy_override_changes (policy, changes) VALUES (OLD.policy, 1)
    ON DUPLICATE KEY UPDATE changes = changes + 1;
  IF NEW.policy <> OLD.policy THEN
    INSERT INTO policy_override_changes (policy, changes) VALUES (NEW.policy, 1)
      ON DUPLICATE KEY UPDATE changes = changes + 1;
  END IF;
  INSERT INTO override_audit (override_id, policy, action, actor, old_value, new_value)
  VALUES (NEW.id, NEW.policy, 'update', IFNULL(@permitd_actor, LEFT(USER(), 128)),
          JSON_OBJECT('policy', OLD.policy, 'match_kind', OLD.match_kind,
                      'match_value', OLD.match_value, 'action', OLD.action,
                      'max_permits', OLD.max_permits, 'rate', OLD.rate,
                      'window_ms', OLD.window_ms, 'expires_at', OLD.expires_at,
                      'description', OLD.description, 'version', OLD.version),
          JSON_OBJECT('policy', NEW.policy, 'match_kind', NEW.match_kind,
                      'match_value', NEW.match_value, 'action', NEW.action,
                      'max_permits', NEW.max_permits, 'rate', NEW.rate,
                      'window_ms', NEW.window_ms, 'expires_at', NEW.expires_at,
                      'description', NEW.description, 'version', NEW.version));
END;;

CREATE TRIGGER trg_policy_overrides_audit_delete AFTER DELETE ON policy_overrides FOR EACH ROW
BEGIN
  INSERT INTO policy_override_changes (policy, changes) VALUES (OLD.policy, 1)
    ON DUPLICATE KEY UPDATE changes = changes + 1;
  INSERT INTO override_audit (override_id, policy, action, actor, old_value, new_value)
  VALUES (OLD.id, OLD.policy, 'delete', IFNULL(@permitd_actor, LEFT(USER(), 128)),
          JSON_OBJECT('policy', OLD.policy, 'match_kind', OLD.match_kind,
                      'match_value', OLD.match_value, 'action', OLD.action,
                      'max_permits', OLD.max_permits, 'rate', OLD.rate,
                      'window_ms', OLD.window_ms, 'expires_at', OLD.expires_at,
                      'description', OLD.description, 'version', OLD.version),
          NULL);
END;;

DELIMITER ;

ALTER TABLE envoy_descriptors
  ADD COLUMN allow_limit_override TINYINT(1) NOT NULL DEFAULT 0,
  ADD CONSTRAINT chk_envoy_descriptors_allow_limit_override
    CHECK (allow_limit_override IN (0, 1));
