-- Gateway forward-auth rules (issue 25): which policy and key a request
-- seen by a gateway (nginx auth_request, Traefik ForwardAuth, Caddy
-- forward_auth, Envoy ext_authz over HTTP) is limited by. permitd's
-- GET /v1/forward-auth finds every rule that matches the original request
-- and asks each one's policy for `permits`; all of them must allow.
--
-- gateway_rules: one row per rule; permitd loads them all into memory on
-- every sync pass (and at once after an admin write), never per request.
--   position     order of evaluation and of listing (ties: by id)
--   host         the original request's host, exact, lowercase, without
--                a port; '' = any host
--   path_prefix  the original path starts with it ('/' = any path)
--   method       an HTTP method in capitals; '' = any method
--   policy       the policy's name (as policies.name; not a foreign key,
--                so a policy may be dropped and made again: a rule naming
--                no policy makes its requests answer 500, named in the log)
--   key_source   'client': the client's address (X-Forwarded-For /
--                X-Real-IP, believed only from --trusted-proxies);
--                'header': the value of header key_header; 'none': one
--                bucket for every request the rule matches
--   key_header   the header for key_source 'header' (a token: letters,
--                digits, '-'); '' otherwise
--   permits      taken per request, >= 1
--   version      grows on every change (trigger below): edits send the
--                version they started from
--
-- gateway_rule_audit: every change, by any path (admin RPCs mark the
-- session with @permitd_actor; plain SQL is audited as the SQL user).
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11 (and in the stock mysql
-- client: DELIMITER lines).

CREATE TABLE gateway_rules (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  position    INT NOT NULL DEFAULT 0,
  host        VARCHAR(253) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
  path_prefix VARCHAR(1024) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '/',
  method      VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
  policy      VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  key_source  VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'client',
  key_header  VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
  permits     BIGINT NOT NULL DEFAULT 1,
  description VARCHAR(1024) NOT NULL DEFAULT '',
  version     BIGINT UNSIGNED NOT NULL DEFAULT 1,
  created_by  VARCHAR(128) NOT NULL DEFAULT '',
  updated_by  VARCHAR(128) NOT NULL DEFAULT '',
  created_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  KEY ix_gateway_rules_position (position, id),
  CONSTRAINT chk_gateway_rules_host
    CHECK (host = '' OR host REGEXP '^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$'),
  CONSTRAINT chk_gateway_rules_path_prefix CHECK (path_prefix REGEXP '^/[!-~]*$'),
  CONSTRAINT chk_gateway_rules_method CHECK (method REGEXP '^[A-Z]{0,16}$'),
  CONSTRAINT chk_gateway_rules_policy
    CHECK (policy REGEXP '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
  CONSTRAINT chk_gateway_rules_key_source CHECK (key_source IN ('client', 'header', 'none')),
  CONSTRAINT chk_gateway_rules_key_header
    CHECK ((key_source = 'header' AND key_header REGEXP '^[A-Za-z0-9-]{1,64}$')
           OR (key_source <> 'header' AND key_header = '')),
  CONSTRAINT chk_gateway_rules_permits CHECK (permits >= 1)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE gateway_rule_audit (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  rule_id    BIGINT UNSIGNED NOT NULL,
  action     VARCHAR(8) NOT NULL,
  actor      VARCHAR(128) NOT NULL,
  changed_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  old_value  TEXT NULL,
  new_value  TEXT NULL,
  PRIMARY KEY (id),
  KEY ix_gateway_rule_audit_rule (rule_id, changed_at),
  CONSTRAINT chk_gateway_rule_audit_action CHECK (action IN ('create', 'update', 'delete'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- version grows on every change, whoever makes it.
CREATE TRIGGER trg_gateway_rules_version BEFORE UPDATE ON gateway_rules FOR EACH ROW
  SET NEW.version = OLD.version + 1;

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
