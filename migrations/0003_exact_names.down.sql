-- Back to 0002: case-insensitive names (this fails, changing nothing of the
-- table it stops at, when two names now differ only in case: rename or
-- delete one first) and triggers that record CURRENT_USER().

ALTER TABLE policy_audit
  MODIFY name VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL;
ALTER TABLE policy_apps
  MODIFY app VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL;
ALTER TABLE policies
  MODIFY name VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL;

DROP TRIGGER trg_policies_audit_insert;
CREATE TRIGGER trg_policies_audit_insert AFTER INSERT ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT NEW.id, NEW.name, 'create', CURRENT_USER(), NULL,
         JSON_OBJECT('name', NEW.name, 'max_permits', NEW.max_permits, 'rate', NEW.rate,
                     'description', NEW.description, 'enabled', NEW.enabled,
                     'failure_mode', NEW.failure_mode, 'version', NEW.version)
  FROM DUAL WHERE @permitd_actor IS NULL;

DROP TRIGGER trg_policies_audit_update;
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

DROP TRIGGER trg_policies_audit_delete;
CREATE TRIGGER trg_policies_audit_delete BEFORE DELETE ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT OLD.id, OLD.name, 'delete', CURRENT_USER(),
         JSON_OBJECT('name', OLD.name, 'max_permits', OLD.max_permits, 'rate', OLD.rate,
                     'description', OLD.description, 'enabled', OLD.enabled,
                     'failure_mode', OLD.failure_mode, 'version', OLD.version),
         NULL
  FROM DUAL WHERE @permitd_actor IS NULL;
