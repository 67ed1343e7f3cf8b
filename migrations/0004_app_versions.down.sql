-- Back to 0003: app changes made with plain SQL change neither the version
-- nor the audit again. The app changes counted so far are folded into
-- policies.version first, so no policy's version goes down (sync.lua keeps
-- Redis's copy when MySQL's version is smaller, and an editor holding the
-- current version still holds it); the session is marked as permitd's so
-- the fold itself writes no audit rows.

SET @permitd_actor = 'permitd migrate down 0004';
UPDATE policies p JOIN policy_app_changes c ON c.policy_id = p.id
   SET p.version = p.version + c.changes
 WHERE c.changes > 0;
SET @permitd_actor = NULL;

DROP TRIGGER trg_policy_apps_insert;
DROP TRIGGER trg_policy_apps_delete;
DROP TRIGGER trg_policy_apps_update;
DROP TABLE policy_app_changes;

DROP TRIGGER trg_policies_audit_update;
CREATE TRIGGER trg_policies_audit_update AFTER UPDATE ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT NEW.id, NEW.name, 'update', LEFT(USER(), 128),
         JSON_OBJECT('name', OLD.name, 'max_permits', OLD.max_permits, 'rate', OLD.rate,
                     'description', OLD.description, 'enabled', OLD.enabled,
                     'failure_mode', OLD.failure_mode, 'version', OLD.version),
         JSON_OBJECT('name', NEW.name, 'max_permits', NEW.max_permits, 'rate', NEW.rate,
                     'description', NEW.description, 'enabled', NEW.enabled,
                     'failure_mode', NEW.failure_mode, 'version', NEW.version)
  FROM DUAL WHERE @permitd_actor IS NULL;

DROP TRIGGER trg_policies_audit_delete;
CREATE TRIGGER trg_policies_audit_delete BEFORE DELETE ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT OLD.id, OLD.name, 'delete', LEFT(USER(), 128),
         JSON_OBJECT('name', OLD.name, 'max_permits', OLD.max_permits, 'rate', OLD.rate,
                     'description', OLD.description, 'enabled', OLD.enabled,
                     'failure_mode', OLD.failure_mode, 'version', OLD.version),
         NULL
  FROM DUAL WHERE @permitd_actor IS NULL;
