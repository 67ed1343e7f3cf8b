-- Every column in the plain-SQL policy audit: the triggers of 0009 (and
-- the procedure its app-list triggers call) wrote a policy's row before and
-- after with the columns of their day, so a plain-SQL change of what 0015
-- (reserve_ttl_ms, debt_floor, reserve_expiry) and 0016 (local_lease,
-- local_lease_permits) added was audited with a before and an after that
-- showed no difference, and a plain-SQL delete lost those settings from
-- the policy's history. They are redefined here with every column, in the
-- order permitd's own audit rows (server/stores/store.c, POLICY_JSON)
-- write them. The app-list triggers keep calling the procedure by name.
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11 (and in the stock mysql
-- client: one statement each, no DELIMITER needed).

DROP TRIGGER trg_policies_audit_insert;
CREATE TRIGGER trg_policies_audit_insert AFTER INSERT ON policies FOR EACH ROW
  INSERT INTO policy_audit (policy_id, name, action, actor, old_value, new_value)
  SELECT NEW.id, NEW.name, 'create', LEFT(USER(), 128), NULL,
         JSON_OBJECT('name', NEW.name, 'apps', '', 'max_permits', NEW.max_permits,
                     'rate', NEW.rate, 'description', NEW.description, 'enabled', NEW.enabled,
                     'failure_mode', NEW.failure_mode, 'colocate', NEW.colocate,
                     'algorithm', NEW.algorithm, 'window_ms', NEW.window_ms,
                     'calendar', NEW.calendar, 'lease_ms', NEW.lease_ms, 'shadow', NEW.shadow,
                     'reserve_ttl_ms', NEW.reserve_ttl_ms, 'debt_floor', NEW.debt_floor,
                     'reserve_expiry', NEW.reserve_expiry, 'local_lease', NEW.local_lease,
                     'local_lease_permits', NEW.local_lease_permits,
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
                     'reserve_ttl_ms', OLD.reserve_ttl_ms, 'debt_floor', OLD.debt_floor,
                     'reserve_expiry', OLD.reserve_expiry, 'local_lease', OLD.local_lease,
                     'local_lease_permits', OLD.local_lease_permits,
                     'version', OLD.version + x.changes),
         JSON_OBJECT('name', NEW.name, 'apps', x.apps, 'max_permits', NEW.max_permits,
                     'rate', NEW.rate, 'description', NEW.description, 'enabled', NEW.enabled,
                     'failure_mode', NEW.failure_mode, 'colocate', NEW.colocate,
                     'algorithm', NEW.algorithm, 'window_ms', NEW.window_ms,
                     'calendar', NEW.calendar, 'lease_ms', NEW.lease_ms, 'shadow', NEW.shadow,
                     'reserve_ttl_ms', NEW.reserve_ttl_ms, 'debt_floor', NEW.debt_floor,
                     'reserve_expiry', NEW.reserve_expiry, 'local_lease', NEW.local_lease,
                     'local_lease_permits', NEW.local_lease_permits,
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
                     'reserve_ttl_ms', OLD.reserve_ttl_ms, 'debt_floor', OLD.debt_floor,
                     'reserve_expiry', OLD.reserve_expiry, 'local_lease', OLD.local_lease,
                     'local_lease_permits', OLD.local_lease_permits,
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
                     'reserve_ttl_ms', p.reserve_ttl_ms, 'debt_floor', p.debt_floor,
                     'reserve_expiry', p.reserve_expiry, 'local_lease', p.local_lease,
                     'local_lease_permits', p.local_lease_permits,
                     'version', p.version + c.changes - 1),
         JSON_OBJECT('name', p.name, 'apps', after_apps, 'max_permits', p.max_permits,
                     'rate', p.rate, 'description', p.description, 'enabled', p.enabled,
                     'failure_mode', p.failure_mode, 'colocate', p.colocate,
                     'algorithm', p.algorithm, 'window_ms', p.window_ms,
                     'calendar', p.calendar, 'lease_ms', p.lease_ms, 'shadow', p.shadow,
                     'reserve_ttl_ms', p.reserve_ttl_ms, 'debt_floor', p.debt_floor,
                     'reserve_expiry', p.reserve_expiry, 'local_lease', p.local_lease,
                     'local_lease_permits', p.local_lease_permits,
                     'version', p.version + c.changes)
    FROM policies p JOIN policy_app_changes c ON c.policy_id = p.id
   WHERE p.id = pid;
