-- Whether any OOM event lies at or after $until, or has no time: when none does, the history up to $until is the
-- whole history, and the card's edges are read from it without preparing the whole again.
-- Used by oomlab.analyses.fleet.classify.
SELECT EXISTS (SELECT 1 FROM stg_oom_events WHERE ts IS NULL OR ts >= $until::TIMESTAMP) AS later;
