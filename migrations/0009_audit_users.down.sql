-- Back to 0008: viewer and editor only, every user enabled, no user_audit.
-- Refused, changing nothing, while an admin or a disabled user exists:
-- mapping an admin to editor would lose who may manage users, and
-- dropping enabled would let a disabled user log in again. The check
-- names them (make them editors or viewers, delete the disabled ones,
-- first). It is a procedure named permitd_check_* (migrate_run.c runs
-- those before it marks the version dirty, and drops them again when the
-- check refuses); the mysql client running this file by hand stops at
-- the same SIGNAL. Once it passes, the history of users (user_audit) goes
-- with its table, as 0007's down drops app_audit.

DROP PROCEDURE IF EXISTS permitd_check_0009_down;

DELIMITER ;;
CREATE PROCEDURE permitd_check_0009_down()
BEGIN
  DECLARE found TEXT;
  SELECT GROUP_CONCAT(CONCAT(username, IF(enabled, ' (admin)', ' (disabled)'))
                      ORDER BY username SEPARATOR ', ')
    INTO found FROM admin_users WHERE role = 'admin' OR enabled = 0;
  IF found IS NOT NULL THEN
    -- MySQL keeps at most 128 characters of a MESSAGE_TEXT.
    SET found = CONCAT('users 0008 cannot hold: ', LEFT(found, 60),
                       IF(CHAR_LENGTH(found) > 60, '...', ''),
                       '; make them editors, delete disabled ones');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = found;
  END IF;
END;;
DELIMITER ;

CALL permitd_check_0009_down();
DROP PROCEDURE permitd_check_0009_down;

DROP TRIGGER trg_policy_apps_insert;
DROP TRIGGER trg_policy_apps_delete;
DROP TRIGGER trg_policy_apps_update;
DROP PROCEDURE permitd_audit_policy_apps;
DROP TRIGGER trg_apps_by_update;
DROP TRIGGER trg_policies_by_update;
DROP TRIGGER trg_policies_by_insert;
DROP TRIGGER trg_admin_users_audit_delete;
DROP TRIGGER trg_admin_users_audit_update;
DROP TRIGGER trg_admin_users_audit_insert;
DROP TABLE user_audit;
ALTER TABLE app_audit DROP KEY ix_app_audit_changed;
ALTER TABLE policy_audit DROP KEY ix_policy_audit_changed;

ALTER TABLE admin_users
  DROP CONSTRAINT chk_admin_users_enabled,
  DROP CONSTRAINT chk_admin_users_role;
ALTER TABLE admin_users
  DROP COLUMN enabled,
  ADD CONSTRAINT chk_admin_users_role CHECK (role IN ('viewer', 'editor'));

-- The policy audit triggers as 0003 (insert) and 0004 (the rest) made them.
DROP TRIGGER trg_policies_audit_insert;
CREATE TRIGGER trg_policies_audit_insert AFTER INSERT ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT NEW.id, NEW.name, 'create', LEFT(USER(), 128), NULL,
         JSON_OBJECT('name', NEW.name, 'max_permits', NEW.max_permits, 'rate', NEW.rate,
                     'description', NEW.description, 'enabled', NEW.enabled,
                     'failure_mode', NEW.failure_mode, 'version', NEW.version)
  FROM DUAL WHERE @permitd_actor IS NULL;

DROP TRIGGER trg_policies_audit_update;
DROP TRIGGER trg_policies_audit_delete;

DELIMITER ;;

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
    INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
    SELECT p.id, p.name, 'update', LEFT(USER(), 128),
           JSON_OBJECT('name', p.name, 'apps', before_apps, 'max_permits', p.max_permits,
                       'rate', p.rate, 'description', p.description, 'enabled', p.enabled,
                       'failure_mode', p.failure_mode, 'version', p.version + c.changes - 1),
           JSON_OBJECT('name', p.name, 'apps', after_apps, 'max_permits', p.max_permits,
                       'rate', p.rate, 'description', p.description, 'enabled', p.enabled,
                       'failure_mode', p.failure_mode, 'version', p.version + c.changes)
      FROM policies p JOIN policy_app_changes c ON c.policy_id = p.id
     WHERE p.id = NEW.policy_id;
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
    INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
    SELECT p.id, p.name, 'update', LEFT(USER(), 128),
           JSON_OBJECT('name', p.name, 'apps', before_apps, 'max_permits', p.max_permits,
                       'rate', p.rate, 'description', p.description, 'enabled', p.enabled,
                       'failure_mode', p.failure_mode, 'version', p.version + c.changes - 1),
           JSON_OBJECT('name', p.name, 'apps', after_apps, 'max_permits', p.max_permits,
                       'rate', p.rate, 'description', p.description, 'enabled', p.enabled,
                       'failure_mode', p.failure_mode, 'version', p.version + c.changes)
      FROM policies p JOIN policy_app_changes c ON c.policy_id = p.id
     WHERE p.id = OLD.policy_id;
  END IF;
END;;

-- An app renamed, or moved to another policy: a change of each policy it
-- touches (a move is a removal from one and an addition to the other).
-- An UPDATE that leaves the row as it was changes nothing.
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
    INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
    SELECT p.id, p.name, 'update', LEFT(USER(), 128),
           JSON_OBJECT('name', p.name, 'apps', before_apps, 'max_permits', p.max_permits,
                       'rate', p.rate, 'description', p.description, 'enabled', p.enabled,
                       'failure_mode', p.failure_mode, 'version', p.version + c.changes - 1),
           JSON_OBJECT('name', p.name, 'apps', after_apps, 'max_permits', p.max_permits,
                       'rate', p.rate, 'description', p.description, 'enabled', p.enabled,
                       'failure_mode', p.failure_mode, 'version', p.version + c.changes)
      FROM policies p JOIN policy_app_changes c ON c.policy_id = p.id
     WHERE p.id = OLD.policy_id;
    IF NEW.policy_id <> OLD.policy_id THEN
      INSERT INTO policy_app_changes (policy_id, changes) VALUES (NEW.policy_id, 1)
        ON DUPLICATE KEY UPDATE changes = changes + 1;
      SELECT IFNULL(GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ','), '') INTO before_apps
        FROM policy_apps a WHERE a.policy_id = NEW.policy_id AND a.app <> NEW.app;
      SELECT IFNULL(GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ','), '') INTO after_apps
        FROM policy_apps a WHERE a.policy_id = NEW.policy_id;
      INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
      SELECT p.id, p.name, 'update', LEFT(USER(), 128),
             JSON_OBJECT('name', p.name, 'apps', before_apps, 'max_permits', p.max_permits,
                         'rate', p.rate, 'description', p.description, 'enabled', p.enabled,
                         'failure_mode', p.failure_mode, 'version', p.version + c.changes - 1),
             JSON_OBJECT('name', p.name, 'apps', after_apps, 'max_permits', p.max_permits,
                         'rate', p.rate, 'description', p.description, 'enabled', p.enabled,
                         'failure_mode', p.failure_mode, 'version', p.version + c.changes)
        FROM policies p JOIN policy_app_changes c ON c.policy_id = p.id
       WHERE p.id = NEW.policy_id;
    END IF;
  END IF;
END;;

DELIMITER ;

CREATE TRIGGER trg_policies_audit_update AFTER UPDATE ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT NEW.id, NEW.name, 'update', LEFT(USER(), 128),
         JSON_OBJECT('name', OLD.name, 'apps', x.apps, 'max_permits', OLD.max_permits,
                     'rate', OLD.rate, 'description', OLD.description, 'enabled', OLD.enabled,
                     'failure_mode', OLD.failure_mode, 'version', OLD.version + x.changes),
         JSON_OBJECT('name', NEW.name, 'apps', x.apps, 'max_permits', NEW.max_permits,
                     'rate', NEW.rate, 'description', NEW.description, 'enabled', NEW.enabled,
                     'failure_mode', NEW.failure_mode, 'version', NEW.version + x.changes)
  FROM (SELECT IFNULL((SELECT GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ',')
                         FROM policy_apps a WHERE a.policy_id = NEW.id), '') AS apps,
               IFNULL((SELECT c.changes FROM policy_app_changes c
                        WHERE c.policy_id = NEW.id), 0) AS changes) x
  WHERE @permitd_actor IS NULL;

CREATE TRIGGER trg_policies_audit_delete BEFORE DELETE ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT OLD.id, OLD.name, 'delete', LEFT(USER(), 128),
         JSON_OBJECT('name', OLD.name, 'apps', x.apps, 'max_permits', OLD.max_permits,
                     'rate', OLD.rate, 'description', OLD.description, 'enabled', OLD.enabled,
                     'failure_mode', OLD.failure_mode, 'version', OLD.version + x.changes),
         NULL
  FROM (SELECT IFNULL((SELECT GROUP_CONCAT(a.app ORDER BY a.app SEPARATOR ',')
                         FROM policy_apps a WHERE a.policy_id = OLD.id), '') AS apps,
               IFNULL((SELECT c.changes FROM policy_app_changes c
                        WHERE c.policy_id = OLD.id), 0) AS changes) x
  WHERE @permitd_actor IS NULL;
