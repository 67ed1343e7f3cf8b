-- Back to 0010: the Envoy descriptor mapping goes with its table;
-- ShouldRateLimit then answers OK to every descriptor.

DROP TABLE envoy_descriptors;
