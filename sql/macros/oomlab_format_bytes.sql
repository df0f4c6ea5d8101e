-- Bytes for people, as oomlab.units.format_bytes writes them: binary units with two decimals ('26.10 GiB'),
-- plain bytes without ('512 B'). For the reasons built in SQL (ingest/normalize.py), so that a reject reads as
-- the rest of oomlab's output does.
CREATE OR REPLACE MACRO oomlab_format_bytes(b) AS
    CASE WHEN abs(b) < 1024 THEN printf('%d B', b)
         WHEN abs(b) < 1048576 THEN printf('%.2f KiB', b / 1024)
         WHEN abs(b) < 1073741824 THEN printf('%.2f MiB', b / 1048576)
         WHEN abs(b) < 1099511627776 THEN printf('%.2f GiB', b / 1073741824)
         ELSE printf('%.2f TiB', b / 1099511627776) END;
