-- The traffic history (issue 39): decisions per policy, app and minute,
-- kept --traffic-history-days (30 by default), surviving restarts.
--
-- Every permitd instance adds what it counted since its last flush (at
-- most a minute, --traffic-flush-ms) into the row of its policy, app and
-- minute with INSERT ... ON DUPLICATE KEY UPDATE allowed = allowed + ...,
-- so the fleet's instances sum into one row and an instance that dies
-- loses only what it had not flushed yet. Rows with nothing in them are
-- never written: an idle policy costs nothing. Each instance deletes rows
-- older than the retention (in batches, at most once a minute).
--
-- minute_unix: the minute's start, Unix seconds (UTC). app: the calling
-- app (an app key's, or with --app-auth off the one the request named),
-- '' for none (or past --traffic-pairs). Names follow the policy-name
-- rule, so ascii_bin holds them exactly and in fewer bytes than utf8mb4.
-- The counters are those of /metrics' permitd_acquires_total:
-- shadow_denied is what a policy in shadow mode would have denied (it was
-- answered allowed and is not in allowed), passes what failure_mode open
-- let through while Redis did not decide.
--
-- Keys: the primary key serves one policy's series (all apps, or one);
-- ix_traffic_minutes_app one app's; ix_traffic_minutes_minute the pruning
-- and the overview's "all policies over the last hour".
--
-- Runs unchanged on MySQL 8 and MariaDB 10.11.

CREATE TABLE traffic_minutes (
  policy        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  minute_unix   INT UNSIGNED NOT NULL,
  app           VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
  allowed       BIGINT UNSIGNED NOT NULL DEFAULT 0,
  denied        BIGINT UNSIGNED NOT NULL DEFAULT 0,
  shadow_denied BIGINT UNSIGNED NOT NULL DEFAULT 0,
  errors        BIGINT UNSIGNED NOT NULL DEFAULT 0,
  passes        BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (policy, minute_unix, app),
  KEY ix_traffic_minutes_app (app, minute_unix),
  KEY ix_traffic_minutes_minute (minute_unix),
  CONSTRAINT chk_traffic_minutes_minute CHECK (minute_unix % 60 = 0)
) ENGINE=InnoDB;
