-- Drops what 0002_admin.up.sql created: admin accounts and sessions go.
DROP TRIGGER IF EXISTS trg_policies_audit_delete;
DROP TRIGGER IF EXISTS trg_policies_audit_update;
DROP TRIGGER IF EXISTS trg_policies_audit_insert;
DROP TABLE IF EXISTS admin_sessions;
DROP TABLE IF EXISTS admin_users;
