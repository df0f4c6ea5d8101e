-- calendar_rules as the views read them: every recurring job of a calendar file, crontab, CronJob or timer, as
-- stored (a cron with a `CRON_TZ=<zone> ` prefix is in that zone).
CREATE OR REPLACE VIEW stg_calendar_rules AS
SELECT * FROM calendar_rules;
