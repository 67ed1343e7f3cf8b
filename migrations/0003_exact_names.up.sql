-- Policy and app names are compared exactly, as the API and Redis compare
-- them: 'P1' and 'p1' are two policies, 'Billing' and 'billing' two apps.
-- 0001 left them the tables' case-insensitive collation: creating P1 beside
-- p1 failed as a duplicate, DeletePolicy P1 deleted p1 in MySQL while Redis
-- kept p1, and apps 'Billing' and 'billing' were stored as one.
--
-- And the plain-SQL audit rows name who ran the statement, USER(): inside
-- a trigger CURRENT_USER() is the trigger's definer (whoever ran 0002).
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11.

ALTER TABLE policies
  MODIFY name VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
ALTER TABLE policy_apps
  MODIFY app VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
ALTER TABLE policy_audit
  MODIFY name VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;

DROP TRIGGER trg_policies_audit_insert;
CREATE TRIGGER trg_policies_audit_insert AFTER INSERT ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT NEW.id, NEW.name, 'create', LEFT(USER(), 128), NULL,
         JSON_OBJECT('name', NEW.name, 'max_permits', NEW.max_permits, 'rate', NEW.rate,
                     'description', NEW.description, 'enabled', NEW.enabled,
                     'failure_mode', NEW.failure_mode, 'version', NEW.version)
  FROM DUAL WHERE @permitd_actor IS NULL;

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
