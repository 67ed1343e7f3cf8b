-- Back to 0009's plain-SQL policy audit: the triggers and the procedure
-- with the columns of their day (no 0015 or 0016 settings).

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

DROP PROCEDURE permitd_audit_policy_apps;
CREATE PROCEDURE permitd_audit_policy_apps(IN pid BIGINT UNSIGNED, IN before_apps TEXT,
                                           IN after_apps TEXT)
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
