-- Back to 0015: no per-policy local leases. Nothing is refused: every
-- policy then follows the instances' --local-leases, which is what a NULL
-- local_lease did already; a policy set 'off' may be leased again by
-- --local-leases auto (set --local-leases off first if that matters).

ALTER TABLE policies
  DROP CONSTRAINT chk_policies_local_lease_permits,
  DROP CONSTRAINT chk_policies_local_lease;

ALTER TABLE policies
  DROP COLUMN local_lease_permits,
  DROP COLUMN local_lease;
