-- Back to 0013: the overrides, their history and their change counts go
-- with their tables (every caller is limited by its policy again), and
-- Envoy descriptors lose allow_limit_override (a descriptor's `limit` is
-- ignored again).

ALTER TABLE envoy_descriptors DROP CONSTRAINT chk_envoy_descriptors_allow_limit_override;
ALTER TABLE envoy_descriptors DROP COLUMN allow_limit_override;
DROP TRIGGER trg_policy_overrides_audit_delete;
DROP TRIGGER trg_policy_overrides_audit_update;
DROP TRIGGER trg_policy_overrides_audit_insert;
DROP TRIGGER trg_policy_overrides_version;
DROP TRIGGER trg_policy_overrides_by_insert;
DROP TABLE policy_override_changes;
DROP TABLE override_audit;
DROP TABLE policy_overrides;
