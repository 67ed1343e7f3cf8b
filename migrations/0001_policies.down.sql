-- Drops what 0001_policies.up.sql created; the policies are lost.
DROP TABLE IF EXISTS policy_audit;
DROP TABLE IF EXISTS policy_apps;
DROP TABLE IF EXISTS policies;
