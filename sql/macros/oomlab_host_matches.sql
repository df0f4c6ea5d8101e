-- True when an instance is one of a scheduled job's hosts: `selectors` as the calendar wrote them (exact names
-- and shell globs: `infer-b-*`, `a10-0[1-3]`, `?`), NULL for every host. GLOB is case-sensitive, as host
-- names in logs are, and matches as Python's fnmatch.fnmatchcase does for every selector ingest accepts
-- (oomlab.parse.calendar.check_selector rejects the few where the two differ); an exact name is a glob
-- that matches itself.
CREATE OR REPLACE MACRO oomlab_host_matches(selectors, instance) AS
    selectors IS NULL OR coalesce(list_bool_or(list_transform(selectors, lambda s: instance GLOB s)), false);
