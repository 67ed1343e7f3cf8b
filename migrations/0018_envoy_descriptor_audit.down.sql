-- Back to 0017: the Envoy descriptors' history goes with its table (their
-- changes are then unaudited again, as before 0018).

DROP TRIGGER trg_envoy_descriptors_audit_delete;
DROP TRIGGER trg_envoy_descriptors_audit_update;
DROP TRIGGER trg_envoy_descriptors_audit_insert;
DROP TABLE envoy_descriptor_audit;
