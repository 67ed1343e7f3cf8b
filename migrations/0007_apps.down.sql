-- Back to 0006: apps are plain strings in policy_apps again. Every key is
-- dropped with its table (a later 0007 issues new ones); app_audit goes
-- too, and with it the history of apps and keys.

DROP TRIGGER trg_app_keys_audit_update;
DROP TRIGGER trg_app_keys_audit_insert;
DROP TRIGGER trg_apps_audit_update;
DROP TRIGGER trg_apps_audit_insert;
DROP TRIGGER trg_policy_apps_renamed_app;
DROP TRIGGER trg_policy_apps_new_app;
ALTER TABLE policy_apps DROP FOREIGN KEY fk_policy_apps_app;
DROP TABLE app_audit;
DROP TABLE app_keys;
DROP TABLE apps;
