-- Envoy descriptor audit (issue 40 follow-up): every change of
-- envoy_descriptors (0011, 0014's allow_limit_override), by any path, is a
-- row of envoy_descriptor_audit with the row before and after, as 0010's
-- gateway_rule_audit is for gateway rules. The admin RPCs
-- (PutEnvoyDescriptor, DeleteEnvoyDescriptor, and a policy's delete that
-- removes the descriptors naming it) set @permitd_actor to the session's
-- user; plain SQL is audited as the SQL user (USER()).
--
-- descriptor_id is the row's id; domain and descriptor are kept beside it
-- (a descriptor deleted and put again gets another id) so the Audit page
-- can filter by them.
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11 (and in the stock mysql
-- client: one statement a trigger, no DELIMITER needed).

CREATE TABLE envoy_descriptor_audit (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  descriptor_id BIGINT UNSIGNED NOT NULL,
  domain        VARCHAR(255) NOT NULL,
  descriptor    VARCHAR(512) NOT NULL,
  action        VARCHAR(8) NOT NULL,
  actor         VARCHAR(128) NOT NULL,
  changed_at    DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  old_value     TEXT NULL,
  new_value     TEXT NULL,
  PRIMARY KEY (id),
  KEY ix_envoy_descriptor_audit_descriptor (descriptor_id, changed_at),
  KEY ix_envoy_descriptor_audit_changed (changed_at),
  CONSTRAINT chk_envoy_descriptor_audit_action CHECK (action IN ('create', 'update', 'delete'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TRIGGER trg_envoy_descriptors_audit_insert AFTER INSERT ON envoy_descriptors FOR EACH ROW
  INSERT INTO envoy_descriptor_audit (descriptor_id, domain, descriptor, action, actor,
                                      old_value, new_value)
  VALUES (NEW.id, NEW.domain, NEW.descriptor, 'create', IFNULL(@permitd_actor, LEFT(USER(), 128)),
          NULL,
          JSON_OBJECT('domain', NEW.domain, 'descriptor', NEW.descriptor, 'policy', NEW.policy,
                      'key_entry', NEW.key_entry, 'description', NEW.description,
                      'allow_limit_override', NEW.allow_limit_override));

CREATE TRIGGER trg_envoy_descriptors_audit_update AFTER UPDATE ON envoy_descriptors FOR EACH ROW
  INSERT INTO envoy_descriptor_audit (descriptor_id, domain, descriptor, action, actor,
                                      old_value, new_value)
  VALUES (NEW.id, NEW.domain, NEW.descriptor, 'update', IFNULL(@permitd_actor, LEFT(USER(), 128)),
          JSON_OBJECT('domain', OLD.domain, 'descriptor', OLD.descriptor, 'policy', OLD.policy,
                      'key_entry', OLD.key_entry, 'description', OLD.description,
                      'allow_limit_override', OLD.allow_limit_override),
          JSON_OBJECT('domain', NEW.domain, 'descriptor', NEW.descriptor, 'policy', NEW.policy,
                      'key_entry', NEW.key_entry, 'description', NEW.description,
                      'allow_limit_override', NEW.allow_limit_override));

CREATE TRIGGER trg_envoy_descriptors_audit_delete AFTER DELETE ON envoy_descriptors FOR EACH ROW
  INSERT INTO envoy_descriptor_audit (descriptor_id, domain, descriptor, action, actor,
                                      old_value, new_value)
  VALUES (OLD.id, OLD.domain, OLD.descriptor, 'delete', IFNULL(@permitd_actor, LEFT(USER(), 128)),
          JSON_OBJECT('domain', OLD.domain, 'descriptor', OLD.descriptor, 'policy', OLD.policy,
                      'key_entry', OLD.key_entry, 'description', OLD.description,
                      'allow_limit_override', OLD.allow_limit_override),
          NULL);
