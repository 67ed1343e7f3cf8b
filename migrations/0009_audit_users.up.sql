-- Audit and users (issue 23).
--
-- Roles: 'admin' above 'editor' (admins also manage the users), and a user
-- may be disabled (enabled = 0: no login, no session) instead of deleted,
-- so the audit keeps naming a person who once changed things. Existing
-- users keep their role; `permitd admin add-user NAME --role admin` makes
-- the first admin of an upgraded database.
--
-- user_audit: every change to admin_users, by any path, with who made it:
-- the session's @permitd_actor (permitd's admin RPCs and `permitd admin`)
-- or, for plain SQL, the MySQL user, USER(). Before and after hold the
-- role and enabled, never the password or its hash: a new password is
-- the action 'password'. Ending a user's sessions is audited by permitd
-- itself (action 'sessions').
--
-- The plain-SQL policy audit triggers of 0002-0004 predate issue 20 and
-- 23: their JSON lacked colocate, algorithm, window_ms, calendar, lease_ms
-- and shadow. They are made again here with every column, in the shape the
-- admin API's own rows have (stores/store.c POLICY_JSON). And a plain-SQL
-- change of a policy or an app names its MySQL user in updated_by (and a
-- plain INSERT in created_by), so "last changed by" shows the name the
-- audit shows.
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11 (and in the stock mysql
-- client: DELIMITER lines).

ALTER TABLE admin_users
  DROP CONSTRAINT chk_admin_users_role;
ALTER TABLE admin_users
  ADD COLUMN enabled TINYINT(1) NOT NULL DEFAULT 1,
  ADD CONSTRAINT chk_admin_users_role CHECK (role IN ('viewer', 'editor', 'admin')),
  ADD CONSTRAINT chk_admin_users_enabled CHECK (enabled IN (0, 1));

CREATE TABLE user_audit (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  username   VARCHAR(64) NOT NULL,
  action     VARCHAR(16) NOT NULL,
  actor      VARCHAR(128) NOT NULL,
  changed_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  old_value  TEXT NULL,
  new_value  TEXT NULL,
  PRIMARY KEY (id),
  KEY ix_user_audit_user (username, changed_at),
  KEY ix_user_audit_changed (changed_at),
  CONSTRAINT chk_user_audit_action CHECK (action IN
    ('create', 'role', 'password', 'disable', 'enable', 'update', 'sessions', 'delete'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- The audit page reads every kind newest first.
ALTER TABLE policy_audit ADD KEY ix_policy_audit_changed (changed_at);
ALTER TABLE app_audit ADD KEY ix_app_audit_changed (changed_at);

CREATE TRIGGER trg_admin_users_audit_insert AFTER INSERT ON admin_users FOR EACH ROW
  INSERT INTO user_audit (username, action, actor, old_value, new_value)
  VALUES (NEW.username, 'create', IFNULL(@permitd_actor, LEFT(USER(), 128)), NULL,
          JSON_OBJECT('role', NEW.role, 'enabled', NEW.enabled));

-- One action when one thing changed (role, password, enabled), 'update'
-- when several did; an UPDATE that changes none of them is not audited.
-- A new password shows as "password": "changed" after, nothing more.
DELIMITER ;;
CREATE TRIGGER trg_admin_users_audit_update AFTER UPDATE ON admin_users FOR EACH ROW
BEGIN
  DECLARE r, p, e INT;
  SET r = NOT (NEW.role <=> OLD.role), p = NOT (NEW.password_hash <=> OLD.password_hash),
      e = NOT (NEW.enabled <=> OLD.enabled);
  IF r + p + e > 0 OR NOT (NEW.username <=> OLD.username) THEN
    INSERT INTO user_audit (username, action, actor, old_value, new_value)
    VALUES (NEW.username,
            CASE WHEN r + p + e <> 1 THEN 'update' WHEN r THEN 'role' WHEN p THEN 'password'
                 WHEN NEW.enabled THEN 'enable' ELSE 'disable' END,
            IFNULL(@permitd_actor, LEFT(USER(), 128)),
            JSON_OBJECT('username', OLD.username, 'role', OLD.role, 'enabled', OLD.enabled),
            IF(p, JSON_OBJECT('username', NEW.username, 'role', NEW.role, 'enabled', NEW.enabled,
                              'password', 'changed'),
               JSON_OBJECT('username', NEW.username, 'role', NEW.role, 'enabled', NEW.enabled)));
  END IF;
END;;
DELIMITER ;

CREATE TRIGGER trg_admin_users_audit_delete AFTER DELETE ON admin_users FOR EACH ROW
  INSERT INTO user_audit (username, action, actor, old_value, new_value)
  VALUES (OLD.username, 'delete', IFNULL(@permitd_actor, LEFT(USER(), 128)),
          JSON_OBJECT('role', OLD.role, 'enabled', OLD.enabled), NULL);

-- "Last changed by" of a plain-SQL change: the MySQL user, as its audit
-- row says. (permitd's own writes set @permitd_actor and the columns.)
CREATE TRIGGER trg_policies_by_insert BEFORE INSERT ON policies FOR EACH ROW
  SET NEW.created_by = IF(@permitd_actor IS NULL, LEFT(USER(), 128), NEW.created_by),
      NEW.updated_by = IF(@permitd_actor IS NULL, LEFT(USER(), 128), NEW.updated_by);
CREATE TRIGGER trg_policies_by_update BEFORE UPDATE ON policies FOR EACH ROW
  SET NEW.updated_by = IF(@permitd_actor IS NULL, LEFT(USER(), 128), NEW.updated_by);
CREATE TRIGGER trg_apps_by_update BEFORE UPDATE ON apps FOR EACH ROW
  SET NEW.updated_by = IFNULL(@permitd_actor, LEFT(USER(), 128));

-- The plain-SQL policy audit rows, with every column.
DROP TRIGGER trg_policies_audit_insert;
CREATE TRIGGER trg_policies_audit_insert AFTER INSERT ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT NEW.id, NEW.name, 'create', LEFT(USER(), 128), NULL,
         JSON_OBJECT('name', NEW.name, 'apps', '', 'max_permits', NEW.max_permits,
                     'rate', NEW.rate, 'description', NEW.description, 'enabled', NEW.enabled,
                     'failure_mode', NEW.failure_mode, 'colocate', NEW.colocate,
                     'algorithm', NEW.algorithm, 'window_ms', NEW.window_ms,
                     'calendar', NEW.calendar, 'lease_ms', NEW.lease_ms, 'shadow', NEW.shadow,
                     'version', NEW.version)
  FROM DUAL WHERE @permitd_actor IS NULL;

DROP TRIGGER trg_policies_audit_update;
CREATE TRIGGER trg_policies_audit_update AFTER UPDATE ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT NEW.id, NEW.name, 'update', LEFT(USER(), 128),
         JSON_OBJECT('name', OLD.name, 'apps', x.apps, 'max_permits', OLD.max_permits,
                     'rate', OLD.rate, 'description', OLD.description, 'enabled', OLD.enabled,
                     'failure_mode', OLD.failure_mode, 'colocate', OLD.colocate,
                     'algorithm', OLD.algorithm, 'window_ms', OLD.window_ms,
                     'calendar', OLD.calendar, 'lease_ms', OLD.lease_ms, 'shadow', OLD.shadow,
                     'version', OLD.version + x.changes),
         JSON_OBJECT('name', NEW.name, 'apps', x.apps, 'max_permits', NEW.max_permits,
                     'rate', NEW.rate, 'description', NEW.description, 'enabled', NEW.enabled,
                     'failure_mode', NEW.failure_mode, 'colocate', NEW.colocate,
                     'algorithm', NEW.algorithm, 'window_ms', NEW.window_ms,
                     'calendar', NEW.calendar, 'lease_ms', NEW.lease_ms, 'shadow', NEW.shadow,
                     'version', NEW.version + x.changes)
  FROM (SELECT IFNULL((SELECT GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ',')
                         FROM policy_apps a WHERE a.policy_id = NEW.id), '') AS apps,
               IFNULL((SELECT c.changes FROM policy_app_changes c
                        WHERE c.policy_id = NEW.id), 0) AS changes) x
  WHERE @permitd_actor IS NULL;

DROP TRIGGER trg_policies_audit_delete;
CREATE TRIGGER trg_policies_audit_delete BEFORE DELETE ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT OLD.id, OLD.name, 'delete', LEFT(USER(), 128),
         JSON_OBJECT('name', OLD.name, 'apps', x.apps, 'max_permits', OLD.max_permits,
                     'rate', OLD.rate, 'description', OLD.description, 'enabled', OLD.enabled,
                     'failure_mode', OLD.failure_mode, 'colocate', OLD.colocate,
                     'algorithm', OLD.algorithm, 'window_ms', OLD.window_ms,
                     'calendar', OLD.calendar, 'lease_ms', OLD.lease_ms, 'shadow', OLD.shadow,
                     'version', OLD.version + x.changes),
         NULL
  FROM (SELECT IFNULL((SELECT GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ',')
                         FROM policy_apps a WHERE a.policy_id = OLD.id), '') AS apps,
               IFNULL((SELECT c.changes FROM policy_app_changes c
                        WHERE c.policy_id = OLD.id), 0) AS changes) x
  WHERE @permitd_actor IS NULL;

-- The app-list triggers of 0004: the same work, every column. One
-- procedure writes the row for a policy whose apps went from before_apps
-- to after_apps (the counted change is already in policy_app_changes).
DROP TRIGGER trg_policy_apps_insert;
DROP TRIGGER trg_policy_apps_delete;
DROP TRIGGER trg_policy_apps_update;

DELIMITER ;;

CREATE PROCEDURE permitd_audit_policy_apps(IN pid BIGINT UNSIGNED, IN before_apps TEXT,
                                           IN after_apps TEXT)
BEGIN
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT p.id, p.name, 'update', LEFT(USER(), 128),
         JSON_OBJECT('name', p.name, 'apps', before_apps, 'max_permits', p.max_permits,
                     'rate', p.rate, 'description', p.description, 'enabled', p.enabled,
                     'failure_mode', p.failure_mode, 'colocate', p.colocate,
                     'algorithm', p.algorithm, 'window_ms', p.window_ms,
                     'calendar', p.calendar, 'lease_ms', p.lease_ms, 'shadow', p.shadow,
                     'version', p.version + c.changes - 1),
         JSON_OBJECT('name', p.name, 'apps', after_apps, 'max_permits', p.max_permits,
                     'rate', p.rate, 'description', p.description, 'enabled', p.enabled,
                     'failure_mode', p.failure_mode, 'colocate', p.colocate,
                     'algorithm', p.algorithm, 'window_ms', p.window_ms,
                     'calendar', p.calendar, 'lease_ms', p.lease_ms, 'shadow', p.shadow,
                     'version', p.version + c.changes)
    FROM policies p JOIN policy_app_changes c ON c.policy_id = p.id
   WHERE p.id = pid;
END;;

-- One app added to policy NEW.policy_id.
CREATE TRIGGER trg_policy_apps_insert AFTER INSERT ON policy_apps FOR EACH ROW
BEGIN
  DECLARE before_apps, after_apps TEXT;
  IF @permitd_actor IS NULL THEN
    INSERT INTO policy_app_changes (policy_id, changes) VALUES (NEW.policy_id, 1)
      ON DUPLICATE KEY UPDATE changes = changes + 1;
    SELECT IFNULL(GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ','), '') INTO before_apps
      FROM policy_apps a WHERE a.policy_id = NEW.policy_id AND a.app <> NEW.app;
    SELECT IFNULL(GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ','), '') INTO after_apps
      FROM policy_apps a WHERE a.policy_id = NEW.policy_id;
    CALL permitd_audit_policy_apps(NEW.policy_id, before_apps, after_apps);
  END IF;
END;;

-- One app removed from policy OLD.policy_id.
CREATE TRIGGER trg_policy_apps_delete AFTER DELETE ON policy_apps FOR EACH ROW
BEGIN
  DECLARE before_apps, after_apps TEXT;
  IF @permitd_actor IS NULL THEN
    INSERT INTO policy_app_changes (policy_id, changes) VALUES (OLD.policy_id, 1)
      ON DUPLICATE KEY UPDATE changes = changes + 1;
    SELECT IFNULL(GROUP_CONCAT(t.app ORDER BY t.app SEPARATOR ','), '') INTO before_apps
      FROM (SELECT a.app FROM policy_apps a WHERE a.policy_id = OLD.policy_id
            UNION ALL SELECT OLD.app) t;
    SELECT IFNULL(GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ','), '') INTO after_apps
      FROM policy_apps a WHERE a.policy_id = OLD.policy_id;
    CALL permitd_audit_policy_apps(OLD.policy_id, before_apps, after_apps);
  END IF;
END;;

-- An app renamed, or moved to another policy: a change of each policy it
-- touches. An UPDATE that leaves the row as it was changes nothing.
CREATE TRIGGER trg_policy_apps_update AFTER UPDATE ON policy_apps FOR EACH ROW
BEGIN
  DECLARE before_apps, after_apps TEXT;
  IF @permitd_actor IS NULL AND NOT (NEW.policy_id = OLD.policy_id AND NEW.app = OLD.app) THEN
    INSERT INTO policy_app_changes (policy_id, changes) VALUES (OLD.policy_id, 1)
      ON DUPLICATE KEY UPDATE changes = changes + 1;
    SELECT IFNULL(GROUP_CONCAT(t.app ORDER BY t.app SEPARATOR ','), '') INTO before_apps
      FROM (SELECT a.app FROM policy_apps a WHERE a.policy_id = OLD.policy_id
              AND NOT (a.policy_id = NEW.policy_id AND a.app = NEW.app)
            UNION ALL SELECT OLD.app) t;
    SELECT IFNULL(GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ','), '') INTO after_apps
      FROM policy_apps a WHERE a.policy_id = OLD.policy_id;
    CALL permitd_audit_policy_apps(OLD.policy_id, before_apps, after_apps);
    IF NEW.policy_id <> OLD.policy_id THEN
      INSERT INTO policy_app_changes (policy_id, changes) VALUES (NEW.policy_id, 1)
        ON DUPLICATE KEY UPDATE changes = changes + 1;
      SELECT IFNULL(GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ','), '') INTO before_apps
        FROM policy_apps a WHERE a.policy_id = NEW.policy_id AND a.app <> NEW.app;
      SELECT IFNULL(GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ','), '') INTO after_apps
        FROM policy_apps a WHERE a.policy_id = NEW.policy_id;
      CALL permitd_audit_policy_apps(NEW.policy_id, before_apps, after_apps);
    END IF;
  END IF;
END;;

DELIMITER ;
