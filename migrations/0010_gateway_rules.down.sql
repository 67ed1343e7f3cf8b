-- Back to 0009: the gateway rules and their history are dropped (the
-- forward-auth endpoint then matches no rule and allows every request).

DROP TRIGGER trg_gateway_rules_audit_delete;
DROP TRIGGER trg_gateway_rules_audit_update;
DROP TRIGGER trg_gateway_rules_audit_insert;
DROP TRIGGER trg_gateway_rules_version;
DROP TABLE gateway_rule_audit;
DROP TABLE gateway_rules;
