-- Back to 0005: every policy a token bucket. Refused, changing nothing,
-- while a policy uses another algorithm: 0005 has no columns for it, and
-- turning it into a token bucket would invent a rate nobody chose. The
-- check names the policies (delete them, or make them token buckets,
-- first). It is a procedure named permitd_check_* (migrate_run.c runs
-- those before it marks the version dirty, and drops them again when the
-- check refuses); the mysql client running this file by hand stops at
-- the same SIGNAL.

DROP PROCEDURE IF EXISTS permitd_check_0006_down;

DELIMITER ;;
CREATE PROCEDURE permitd_check_0006_down()
BEGIN
  DECLARE found TEXT;
  SELECT GROUP_CONCAT(CONCAT(name, ' (', algorithm, ')') ORDER BY name SEPARATOR ', ')
    INTO found FROM policies WHERE algorithm <> 'token_bucket';
  IF found IS NOT NULL THEN
    -- MySQL keeps at most 128 characters of a MESSAGE_TEXT.
    SET found = CONCAT('not token buckets: ', LEFT(found, 75),
                       IF(CHAR_LENGTH(found) > 75, '...', ''), '; delete or convert them first');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = found;
  END IF;
END;;
DELIMITER ;

CALL permitd_check_0006_down();
DROP PROCEDURE permitd_check_0006_down;

ALTER TABLE policies
  DROP CONSTRAINT chk_policies_algorithm,
  DROP CONSTRAINT chk_policies_rate_only_token_bucket,
  DROP CONSTRAINT chk_policies_window_by_algorithm,
  DROP CONSTRAINT chk_policies_window_ms,
  DROP CONSTRAINT chk_policies_calendar,
  DROP CONSTRAINT chk_policies_lease_only_concurrency,
  DROP CONSTRAINT chk_policies_lease_ms,
  DROP CONSTRAINT chk_policies_sliding_log_max_permits;

ALTER TABLE policies
  DROP COLUMN algorithm,
  DROP COLUMN window_ms,
  DROP COLUMN calendar,
  DROP COLUMN lease_ms,
  MODIFY rate DECIMAL(24,12) NOT NULL;
