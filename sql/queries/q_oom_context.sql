-- Every OOM event before $until (all of them when NULL) with the context its classification needs: a window's
-- events are classified with the history up to its end (oomlab.analyses.fleet.classify cuts the window).
-- Used by oomlab.analyses.fleet.classify.
SELECT * FROM fct_oom_context
WHERE ($until::TIMESTAMP IS NULL OR ts < $until::TIMESTAMP)
ORDER BY ts, event_id;
