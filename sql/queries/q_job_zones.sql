-- The time zones each recurring job's rules are written in: the zone of a cron's `CRON_TZ=<zone> ` prefix (a
-- crontab's CRON_TZ=, a CronJob's timeZone, a timer's zone), 'UTC' where it has none.
-- Used by oomlab.analyses.fleet.jobs.
SELECT name, list(DISTINCT coalesce(nullif(regexp_extract(cron, '^CRON_TZ=(\S+)\s', 1), ''), 'UTC')) AS zones
FROM stg_calendar_rules
GROUP BY name
ORDER BY name;
