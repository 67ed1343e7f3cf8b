-- Gateway rules may store their key hashed (issue 42): hash_key = 1 makes
-- forward-auth take the rule's key (a header's value, often an API key, or
-- the client's address) as "h:" and the hex SHA-256 of the value, so the
-- raw value never becomes part of a Redis key name (nor of what SCAN, the
-- hot-keys page or a Redis dump show). 0 (the default, every existing
-- rule): the value itself, as before; a value the key rules refuse (over
-- 256 bytes, a control character, not UTF-8) is hashed either way.
--
-- The audit triggers of 0010 are made again to record the new column.
-- Runs unchanged on MySQL 8 and MariaDB 10.11.

ALTER TABLE gateway_rules
  ADD COLUMN hash_key TINYINT NOT NULL DEFAULT 0 AFTER key_header,
  ADD CONSTRAINT chk_gateway_rules_hash_key CHECK (hash_key IN (0, 1));

DROP TRIGGER trg_gateway_rules_audit_insert;
DROP TRIGGER trg_gateway_rules_audit_update;
DROP TRIGGER trg_gateway_rules_audit_delete;

CREATE TRIGGER trg_gateway_rules_audit_insert AFTER INSERT ON gateway_rules FOR EACH ROW
  INSERT INTO gateway_rule_audit (rule_id, action, actor, old_value, new_value)
  VALUES (NEW.id, 'create', IFNULL(@permitd_actor, LEFT(USER(), 128)), NULL,
          JSON_OBJECT('position', NEW.position, 'host', NEW.host, 'path_prefix', NEW.path_prefix,
                      'method', NEW.method, 'policy', NEW.policy, 'key_source', NEW.key_source,
                      'key_header', NEW.key_header, 'hash_key', NEW.hash_key, 'permits', NEW.permits,
                      'description', NEW.description));

CREATE TRIGGER trg_gateway_rules_audit_update AFTER UPDATE ON gateway_rules FOR EACH ROW
  INSERT INTO gateway_rule_audit (rule_id, action, actor, old_value, new_value)
  VALUES (NEW.id, 'update', IFNULL(@permitd_actor, LEFT(USER(), 128)),
          JSON_OBJECT('position', OLD.position, 'host', OLD.host, 'path_prefix', OLD.path_prefix,
                      'method', OLD.method, 'policy', OLD.policy, 'key_source', OLD.key_source,
                      'key_header', OLD.key_header, 'hash_key', OLD.hash_key, 'permits', OLD.permits,
                      'description', OLD.description),
          JSON_OBJECT('position', NEW.position, 'host', NEW.host, 'path_prefix', NEW.path_prefix,
                      'method', NEW.method, 'policy', NEW.policy, 'key_source', NEW.key_source,
                      'key_header', NEW.key_header, 'hash_key', NEW.hash_key, 'permits', NEW.permits,
                      'description', NEW.description));

CREATE TRIGGER trg_gateway_rules_audit_delete AFTER DELETE ON gateway_rules FOR EACH ROW
  INSERT INTO gateway_rule_audit (rule_id, action, actor, old_value, new_value)
  VALUES (OLD.id, 'delete', IFNULL(@permitd_actor, LEFT(USER(), 128)),
          JSON_OBJECT('position', OLD.position, 'host', OLD.host, 'path_prefix', OLD.path_prefix,
                      'method', OLD.method, 'policy', OLD.policy, 'key_source', OLD.key_source,
                      'key_header', OLD.key_header, 'hash_key', OLD.hash_key, 'permits', OLD.permits,
                      'description', OLD.description),
          NULL);
