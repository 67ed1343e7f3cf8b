-- Overrides (issue 37): SCRATCH COPY written by wip/overadmin from the
-- shared contract (briefs/overrides-schema.md) so the admin API can be
-- built before the engine's migration lands. wip/overrides owns this file:
-- on merge, theirs replaces this one whole.

CREATE TABLE policy_overrides (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  policy      VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  match_kind  VARCHAR(8) NOT NULL,
  match_value VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  action      VARCHAR(8) NOT NULL DEFAULT 'limit',
  max_permits BIGINT NULL,
  rate        DECIMAL(24,12) NULL,
  window_ms   BIGINT NULL,
  expires_at  DATETIME(6) NULL,
  description VARCHAR(1024) NOT NULL DEFAULT '',
  version     BIGINT UNSIGNED NOT NULL DEFAULT 1,
  created_by  VARCHAR(128) NOT NULL DEFAULT '',
  updated_by  VARCHAR(128) NOT NULL DEFAULT '',
  created_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uq_policy_overrides (policy, match_kind, match_value),
  KEY ix_policy_overrides_app (match_kind, match_value),
  CONSTRAINT chk_policy_overrides_kind CHECK (match_kind IN ('key', 'prefix', 'app')),
  CONSTRAINT chk_policy_overrides_action CHECK (action IN ('limit', 'block', 'exempt'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TRIGGER trg_policy_overrides_version BEFORE UPDATE ON policy_overrides FOR EACH ROW
  SET NEW.version = OLD.version + 1;

ALTER TABLE envoy_descriptors ADD COLUMN allow_limit_override TINYINT(1) NOT NULL DEFAULT 0;
