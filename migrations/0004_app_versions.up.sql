-- A change to a policy's apps is a change to the policy, by any path: it
-- makes a new version (so an editor holding the old one gets `aborted`
-- instead of silently dropping the DBA's app) and an audit row naming who
-- made it. Before this, an app added with plain SQL in policy_apps changed
-- neither, and the next UpdatePolicy built on the old version removed it.
--
-- Why a table of its own and not `UPDATE policies SET version = ...` from a
-- trigger on policy_apps: the natural
--   INSERT INTO policy_apps (policy_id, app) SELECT id, 'web' FROM policies ...
-- reads policies, and a trigger may not write a table its statement reads
-- (error 1442, MySQL and MariaDB alike). So app changes are counted in
-- policy_app_changes, and a policy's version is
--   policies.version + IFNULL(policy_app_changes.changes, 0)
-- (what permitd reads, compares and shows; both terms only grow).
--
-- permitd's admin API marks its session with @permitd_actor and writes its
-- own audit row and version for a whole edit: these triggers stay quiet for
-- it, as the policies triggers of 0002/0003 do. A policy deleted with its
-- apps (ON DELETE CASCADE) fires no trigger here: its delete is audited by
-- the policies trigger.
--
-- The plain-SQL audit rows of policies (0003) are made again to carry the
-- apps and the version as permitd shows them, as the API's rows do.
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11 (and in the stock mysql
-- client: DELIMITER lines).

CREATE TABLE policy_app_changes (
  policy_id BIGINT UNSIGNED NOT NULL,
  changes   BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (policy_id),
  CONSTRAINT fk_policy_app_changes_policy FOREIGN KEY (policy_id)
    REFERENCES policies (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

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

-- The policies' own plain-SQL audit rows: the apps, and the version as
-- permitd shows it (the row's plus its app changes).
DROP TRIGGER trg_policies_audit_update;
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

DROP TRIGGER trg_policies_audit_delete;
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
