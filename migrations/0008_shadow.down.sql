-- Back to 0007: no shadow mode. Refused, changing nothing, while a policy
-- is in shadow mode: 0007 would enforce it, and a limit a team is still
-- watching would start refusing traffic. The check names the policies
-- (switch shadow off, or delete them, first). It is a procedure named
-- permitd_check_* (migrate_run.c runs those before it marks the version
-- dirty, and drops them again when the check refuses); the mysql client
-- running this file by hand stops at the same SIGNAL.

DROP PROCEDURE IF EXISTS permitd_check_0008_down;

DELIMITER ;;
CREATE PROCEDURE permitd_check_0008_down()
BEGIN
  DECLARE found TEXT;
  SELECT GROUP_CONCAT(name ORDER BY name SEPARATOR ', ')
    INTO found FROM policies WHERE shadow <> 0;
  IF found IS NOT NULL THEN
    -- MySQL keeps at most 128 characters of a MESSAGE_TEXT.
    SET found = CONCAT('in shadow mode: ', LEFT(found, 75),
                       IF(CHAR_LENGTH(found) > 75, '...', ''), '; switch shadow off first');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = found;
  END IF;
END;;
DELIMITER ;

CALL permitd_check_0008_down();
DROP PROCEDURE permitd_check_0008_down;

ALTER TABLE policies
  DROP CONSTRAINT chk_policies_shadow;

ALTER TABLE policies
  DROP COLUMN shadow;
