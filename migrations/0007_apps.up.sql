-- Apps and their API keys (issue 21): an app is a row of its own, and a
-- request proves which app it is with an API key.
--
-- apps: one row per application. policy_apps.app refers to it, so a
-- policy can only name an app that exists; every app name policy_apps
-- already holds becomes an app here ('*', "any app", too: a row that can
-- hold no key). Names follow the policy name rule
-- ([A-Za-z0-9][A-Za-z0-9._-]{0,127}); as for policies, permitd checks it
-- and its sync skips (and lists in /readyz) rows a DBA wrote without it.
-- An app a DBA names in a plain INSERT INTO policy_apps is created on the
-- spot (trigger below), so the statements of 0004's era keep working.
--
-- app_keys: a key is pk_<id>_<secret>; only SHA-256(secret) is stored, as
-- 64 hex digits, beside the visible prefix pk_<id> that names the key.
-- expires_at and revoked_at are NULL until they apply; last_used_at is
-- written by permitd's sync, roughly (once per sync interval at most).
--
-- app_audit: every change to an app or a key (create, update, issue,
-- revoke), by any path, with who made it: the session's @permitd_actor
-- (set by permitd's admin RPCs and `permitd admin`) or the SQL user.
-- last_used_at changes are not audited.
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11 (and in the stock mysql
-- client: DELIMITER lines).

CREATE TABLE apps (
  name        VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  description VARCHAR(1024) NOT NULL DEFAULT '',
  enabled     TINYINT(1) NOT NULL DEFAULT 1,
  created_by  VARCHAR(128) NOT NULL DEFAULT '',
  updated_by  VARCHAR(128) NOT NULL DEFAULT '',
  created_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (name),
  CONSTRAINT chk_apps_enabled CHECK (enabled IN (0, 1))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE app_keys (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  app          VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- pk_ and 16 hex digits: shown in lists and logs, not secret
  prefix       VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  -- SHA-256 of the secret part, lowercase hex
  hash         CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  created_by   VARCHAR(128) NOT NULL DEFAULT '',
  created_at   DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  expires_at   DATETIME(6) NULL,
  revoked_at   DATETIME(6) NULL,
  revoked_by   VARCHAR(128) NULL,
  last_used_at DATETIME(6) NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_app_keys_prefix (prefix),
  KEY ix_app_keys_app (app),
  CONSTRAINT fk_app_keys_app FOREIGN KEY (app) REFERENCES apps (name),
  CONSTRAINT chk_app_keys_app CHECK (app <> '*')
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE app_audit (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  app        VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  key_prefix VARCHAR(32) NULL,
  action     VARCHAR(8) NOT NULL,
  actor      VARCHAR(128) NOT NULL,
  changed_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  old_value  TEXT NULL,
  new_value  TEXT NULL,
  PRIMARY KEY (id),
  KEY ix_app_audit_app (app, changed_at),
  CONSTRAINT chk_app_audit_action CHECK (action IN ('create', 'update', 'issue', 'revoke', 'key'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO apps (name, description, created_by, updated_by)
SELECT DISTINCT app, IF(app = '*', 'any app (a policy listing * admits every app)', ''),
       'permitd migrate 0007', 'permitd migrate 0007'
  FROM policy_apps;

ALTER TABLE policy_apps
  ADD CONSTRAINT fk_policy_apps_app FOREIGN KEY (app) REFERENCES apps (name);

DELIMITER ;;

-- An app named in policy_apps that is not a row yet becomes one.
CREATE TRIGGER trg_policy_apps_new_app BEFORE INSERT ON policy_apps FOR EACH ROW
BEGIN
  INSERT IGNORE INTO apps (name, created_by, updated_by)
  VALUES (NEW.app, IFNULL(@permitd_actor, LEFT(USER(), 128)),
          IFNULL(@permitd_actor, LEFT(USER(), 128)));
END;;

CREATE TRIGGER trg_policy_apps_renamed_app BEFORE UPDATE ON policy_apps FOR EACH ROW
BEGIN
  IF NEW.app <> OLD.app THEN
    INSERT IGNORE INTO apps (name, created_by, updated_by)
    VALUES (NEW.app, IFNULL(@permitd_actor, LEFT(USER(), 128)),
            IFNULL(@permitd_actor, LEFT(USER(), 128)));
  END IF;
END;;

DELIMITER ;

CREATE TRIGGER trg_apps_audit_insert AFTER INSERT ON apps FOR EACH ROW
  INSERT INTO app_audit (app, key_prefix, action, actor, old_value, new_value)
  VALUES (NEW.name, NULL, 'create', IFNULL(@permitd_actor, LEFT(USER(), 128)), NULL,
          JSON_OBJECT('description', NEW.description, 'enabled', NEW.enabled));

CREATE TRIGGER trg_apps_audit_update AFTER UPDATE ON apps FOR EACH ROW
  INSERT INTO app_audit (app, key_prefix, action, actor, old_value, new_value)
  VALUES (NEW.name, NULL, 'update', IFNULL(@permitd_actor, LEFT(USER(), 128)),
          JSON_OBJECT('description', OLD.description, 'enabled', OLD.enabled),
          JSON_OBJECT('description', NEW.description, 'enabled', NEW.enabled));

CREATE TRIGGER trg_app_keys_audit_insert AFTER INSERT ON app_keys FOR EACH ROW
  INSERT INTO app_audit (app, key_prefix, action, actor, old_value, new_value)
  VALUES (NEW.app, NEW.prefix, 'issue', IFNULL(@permitd_actor, LEFT(USER(), 128)), NULL,
          JSON_OBJECT('expires_at', NEW.expires_at));

-- A revoke (revoked_at set), or any other change to a key but its
-- last_used_at (an expiry moved by a DBA: action 'key').
DELIMITER ;;
CREATE TRIGGER trg_app_keys_audit_update AFTER UPDATE ON app_keys FOR EACH ROW
BEGIN
  IF NOT (NEW.app <=> OLD.app AND NEW.hash <=> OLD.hash AND NEW.expires_at <=> OLD.expires_at
          AND NEW.revoked_at <=> OLD.revoked_at AND NEW.revoked_by <=> OLD.revoked_by) THEN
    INSERT INTO app_audit (app, key_prefix, action, actor, old_value, new_value)
    VALUES (NEW.app, NEW.prefix,
            IF(OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL, 'revoke', 'key'),
            IFNULL(@permitd_actor, LEFT(USER(), 128)),
            JSON_OBJECT('expires_at', OLD.expires_at, 'revoked_at', OLD.revoked_at),
            JSON_OBJECT('expires_at', NEW.expires_at, 'revoked_at', NEW.revoked_at));
  END IF;
END;;
DELIMITER ;
