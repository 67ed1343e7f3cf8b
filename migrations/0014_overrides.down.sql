-- Back to 0013 (SCRATCH COPY, see the up file): the overrides go.
ALTER TABLE envoy_descriptors DROP COLUMN allow_limit_override;
DROP TRIGGER trg_policy_overrides_version;
DROP TABLE policy_overrides;
