-- The allocator options seen per instance up to $until (NULL: all), oldest first; a sighting without a time
-- comes first, so a dated one of the same option overrides it. Used by oomlab.analyses.fleet.allocator_settings.
SELECT instance, ts, setting, value, origin, source_id, line
FROM fct_allocator_settings
WHERE instance IS NOT NULL
  AND ($until::TIMESTAMP IS NULL OR ts IS NULL OR ts < $until::TIMESTAMP)
ORDER BY instance, setting, ts NULLS FIRST, source_id, line NULLS FIRST;
