-- A source of scheduled jobs, of any kind (parse/formats.py's calendar family): oomlab's own calendar, a crontab,
-- a Kubernetes CronJob manifest, a systemd timer.
CREATE OR REPLACE MACRO oomlab_is_calendar(kind) AS kind IN ('calendar', 'crontab', 'k8s_cronjob', 'systemd_timer');
