-- Back to 0012: the record of bucket resets goes with its table (resets
-- are then in permitd's log only, "bucket reset").

DROP TABLE bucket_audit;
