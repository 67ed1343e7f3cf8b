-- Back to 0011: the hash_key column goes (rules key on the raw value
-- again) and the audit triggers are 0010's once more.

DROP TRIGGER trg_gateway_rules_audit_insert;
DROP TRIGGER trg_gateway_rules_audit_update;
DROP TRIGGER trg_gateway_rules_audit_delete;

ALTER TABLE gateway_rules DROP CONSTRAINT chk_gateway_rules_hash_key;
ALTER TABLE gateway_rules DROP COLUMN hash_key;

CREATE TRIGGER trg_gateway_rules_audit_insert AFTER INSERT ON gateway_rules FOR EACH ROW
  INSERT INTO gateway_rule_audit (rule_id, action, actor, old_value, new_value)
  VALUES (NEW.id, 'create', IFNULL(@permitd_actor, LEFT(USER(), 128)), NULL,
          JSON_OBJECT('position', NEW.position, 'host', NEW.host, 'path_prefix', NEW.path_prefix,
                      'method', NEW.method, 'policy', NEW.policy, 'key_source', NEW.key_source,
                      'key_header', NEW.key_header, 'permits', NEW.permits,
                      'description', NEW.description));

CREATE TRIGGER trg_gateway_rules_audit_update AFTER UPDATE ON gateway_rules FOR EACH ROW
  INSERT INTO gateway_rule_audit (rule_id, action, actor, old_value, new_value)
  VALUES (NEW.id, 'update', IFNULL(@permitd_actor, LEFT(USER(), 128)),
          JSON_OBJECT('position', OLD.position, 'host', OLD.host, 'path_prefix', OLD.path_prefix,
                      'method', OLD.method, 'policy', OLD.policy, 'key_source', OLD.key_source,
                      'key_header', OLD.key_header, 'permits', OLD.permits,
                      'description', OLD.description),
          JSON_OBJECT('position', NEW.position, 'host', NEW.host, 'path_prefix', NEW.path_prefix,
                      'method', NEW.method, 'policy', NEW.policy, 'key_source', NEW.key_source,
                      'key_header', NEW.key_header, 'permits', NEW.permits,
                      'description', NEW.description));

CREATE TRIGGER trg_gateway_rules_audit_delete AFTER DELETE ON gateway_rules FOR EACH ROW
  INSERT INTO gateway_rule_audit (rule_id, action, actor, old_value, new_value)
  VALUES (OLD.id, 'delete', IFNULL(@permitd_actor, LEFT(USER(), 128)),
          JSON_OBJECT('position', OLD.position, 'host', OLD.host, 'path_prefix', OLD.path_prefix,
                      'method', OLD.method, 'policy', OLD.policy, 'key_source', OLD.key_source,
                      'key_header', OLD.key_header, 'permits', OLD.permits,
                      'description', OLD.description),
          NULL);
