-- Policies: the limits permitd enforces. MySQL is their source of truth;
-- permitd copies them into Redis (see README: Redis layout).
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11.

CREATE TABLE policies (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  name         VARCHAR(128) NOT NULL,
  max_permits  BIGINT NOT NULL,
  -- permits added per second; 12 decimal places keep 1/min (0.016666666667)
  -- and 1/day (0.000011574074) exact to well under a permit a year
  rate         DECIMAL(24,12) NOT NULL,
  description  VARCHAR(1024) NOT NULL DEFAULT '',
  enabled      TINYINT(1) NOT NULL DEFAULT 1,
  -- what Acquire does when Redis cannot be reached: 'open' allows, 'closed' refuses
  failure_mode VARCHAR(8) NOT NULL DEFAULT 'closed',
  -- grows on every change of the row (trigger below), so editors can tell
  -- one state of a policy from the next
  version      BIGINT UNSIGNED NOT NULL DEFAULT 1,
  created_by   VARCHAR(128) NOT NULL DEFAULT '',
  updated_by   VARCHAR(128) NOT NULL DEFAULT '',
  created_at   DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at   DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uq_policies_name (name),
  CONSTRAINT chk_policies_max_permits CHECK (max_permits >= 1),
  CONSTRAINT chk_policies_rate CHECK (rate > 0),
  CONSTRAINT chk_policies_enabled CHECK (enabled IN (0, 1)),
  CONSTRAINT chk_policies_failure_mode CHECK (failure_mode IN ('open', 'closed'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- The applications allowed to use a policy; app '*' means any.
CREATE TABLE policy_apps (
  policy_id BIGINT UNSIGNED NOT NULL,
  app       VARCHAR(128) NOT NULL,
  PRIMARY KEY (policy_id, app),
  KEY ix_policy_apps_app (app, policy_id),
  CONSTRAINT fk_policy_apps_policy FOREIGN KEY (policy_id)
    REFERENCES policies (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Every change to a policy: who, when, and the values before and after
-- (JSON text; NULL before a create and after a delete).
CREATE TABLE policy_audit (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  policy_id  BIGINT UNSIGNED NOT NULL,
  name       VARCHAR(128) NOT NULL,
  action     VARCHAR(8) NOT NULL,
  actor      VARCHAR(128) NOT NULL,
  changed_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  old_value  TEXT NULL,
  new_value  TEXT NULL,
  PRIMARY KEY (id),
  KEY ix_policy_audit_policy (policy_id, changed_at),
  KEY ix_policy_audit_name (name, changed_at),
  CONSTRAINT chk_policy_audit_action CHECK (action IN ('create', 'update', 'delete'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- A DBA's plain UPDATE of a policy bumps its version, so an editor holding
-- the old version gets a conflict instead of overwriting it. An UPDATE that
-- sets version itself is left alone. (The app list has no such trigger: a
-- trigger on policy_apps that updated policies would break the natural
-- INSERT INTO policy_apps ... SELECT id FROM policies ... with error 1442.
-- permitd's sync compares the app list itself.)
CREATE TRIGGER trg_policies_version BEFORE UPDATE ON policies FOR EACH ROW
  SET NEW.version = IF(NEW.version = OLD.version, OLD.version + 1, NEW.version);
