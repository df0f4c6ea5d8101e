-- job_occurrences as the job views and queries read them: every run of a scheduled job, listed or
-- expanded from a rule, as stored.
CREATE OR REPLACE VIEW stg_job_occurrences AS
SELECT * FROM job_occurrences;
