-- Back to the schema before 0017: the traffic history goes with its table
-- (the fleet's last day stays in Redis, GetFleetStats).

DROP TABLE traffic_hours;
DROP TABLE traffic_minutes;
