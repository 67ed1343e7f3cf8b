-- Back to 0013/0014: no reservation limits per policy. permitd before
-- issue 38 has no reservations; a newer one reading a hash without the
-- fields uses the defaults (5 minutes, no debt, keep).

ALTER TABLE policies
  DROP CONSTRAINT chk_policies_reserve;

ALTER TABLE policies
  DROP COLUMN reserve_ttl_ms,
  DROP COLUMN debt_floor,
  DROP COLUMN reserve_expiry;
