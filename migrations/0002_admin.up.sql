-- Administrators and their sessions, and audit rows for changes made with
-- plain SQL (permitd's admin API writes its own, richer audit rows and marks
-- its session with @permitd_actor so these triggers stay quiet).
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11.

CREATE TABLE admin_users (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  username      VARCHAR(64) NOT NULL,
  -- argon2id, PHC string format ($argon2id$v=19$m=...,t=...,p=...$salt$hash)
  password_hash VARCHAR(255) NOT NULL,
  role          VARCHAR(8) NOT NULL,
  created_at    DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at    DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uq_admin_users_username (username),
  CONSTRAINT chk_admin_users_role CHECK (role IN ('viewer', 'editor'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- A login. The cookie holds a random id; only its SHA-256 is stored, so a
-- copy of this table lets nobody in.
CREATE TABLE admin_sessions (
  id_hash    CHAR(64) NOT NULL,
  user_id    BIGINT UNSIGNED NOT NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  expires_at DATETIME(6) NOT NULL,
  PRIMARY KEY (id_hash),
  KEY ix_admin_sessions_expires (expires_at),
  CONSTRAINT fk_admin_sessions_user FOREIGN KEY (user_id)
    REFERENCES admin_users (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TRIGGER trg_policies_audit_insert AFTER INSERT ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT NEW.id, NEW.name, 'create', CURRENT_USER(), NULL,
         JSON_OBJECT('name', NEW.name, 'max_permits', NEW.max_permits, 'rate', NEW.rate,
                     'description', NEW.description, 'enabled', NEW.enabled,
                     'failure_mode', NEW.failure_mode, 'version', NEW.version)
  FROM DUAL WHERE @permitd_actor IS NULL;

CREATE TRIGGER trg_policies_audit_update AFTER UPDATE ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT NEW.id, NEW.name, 'update', CURRENT_USER(),
         JSON_OBJECT('name', OLD.name, 'max_permits', OLD.max_permits, 'rate', OLD.rate,
                     'description', OLD.description, 'enabled', OLD.enabled,
                     'failure_mode', OLD.failure_mode, 'version', OLD.version),
         JSON_OBJECT('name', NEW.name, 'max_permits', NEW.max_permits, 'rate', NEW.rate,
                     'description', NEW.description, 'enabled', NEW.enabled,
                     'failure_mode', NEW.failure_mode, 'version', NEW.version)
  FROM DUAL WHERE @permitd_actor IS NULL;

CREATE TRIGGER trg_policies_audit_delete BEFORE DELETE ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT OLD.id, OLD.name, 'delete', CURRENT_USER(),
         JSON_OBJECT('name', OLD.name, 'max_permits', OLD.max_permits, 'rate', OLD.rate,
                     'description', OLD.description, 'enabled', OLD.enabled,
                     'failure_mode', OLD.failure_mode, 'version', OLD.version),
         NULL
  FROM DUAL WHERE @permitd_actor IS NULL;
