-- Envoy's rate limit service (issue 25): which permitd policy, and which
-- bucket key, a ShouldRateLimit descriptor is limited by.
--
-- A row maps one descriptor shape of one domain to a policy:
--   domain      the RateLimitRequest's domain (Envoy's `domain:` setting)
--   descriptor  the descriptor's entries in order, comma-separated, each
--               `key` (any value) or `key=value` (that value only), e.g.
--               `remote_address` or `generic_key=api,user_id`. A request's
--               descriptor matches when it has exactly these entries, in
--               this order; of several rows that match, the one pinning
--               more values wins (envoyproxy/ratelimit's most specific
--               rule). Keys and pinned values hold no ',' or '='.
--   policy      the policy (policies.name) every matching descriptor draws
--               from; `hits_addend` is the permits taken
--   key_entry   the entry whose value is the bucket key (`user_id`: one
--               bucket per user); '' for the policy's one shared bucket
-- A descriptor no row matches is answered OK, as envoyproxy/ratelimit
-- answers one it has no limit for. permitd's sync loads the table into
-- every instance's memory (each sync interval, and at once on the instance
-- whose admin RPC changed it).
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11.

CREATE TABLE envoy_descriptors (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  domain      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  descriptor  VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  policy      VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  key_entry   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  description VARCHAR(1024) NOT NULL DEFAULT '',
  version     BIGINT UNSIGNED NOT NULL DEFAULT 1,
  created_by  VARCHAR(128) NOT NULL DEFAULT '',
  updated_by  VARCHAR(128) NOT NULL DEFAULT '',
  created_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uq_envoy_descriptors (domain, descriptor),
  KEY ix_envoy_descriptors_policy (policy),
  CONSTRAINT chk_envoy_descriptors_domain CHECK (domain <> ''),
  CONSTRAINT chk_envoy_descriptors_descriptor CHECK (descriptor <> '')
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
