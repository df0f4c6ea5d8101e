-- Requests, OOMs, rate, instances affected and requests lost per period of $width from $origin.
-- Used by oomlab.analyses.fleet.aggregates.
SELECT * FROM oomlab_oom_periods($width, $origin::TIMESTAMP, $since::TIMESTAMP, $until::TIMESTAMP);
