-- Bytes per unit; binary multiples throughout, as frameworks that print GB/MB mean GiB/MiB.
CREATE OR REPLACE MACRO oomlab_unit_bytes(u) AS
    CASE lower(u)
        WHEN '' THEN 1 WHEN 'b' THEN 1 WHEN 'byte' THEN 1 WHEN 'bytes' THEN 1
        WHEN 'k' THEN 1024 WHEN 'kb' THEN 1024 WHEN 'kib' THEN 1024
        WHEN 'm' THEN 1048576 WHEN 'mb' THEN 1048576 WHEN 'mib' THEN 1048576
        WHEN 'g' THEN 1073741824 WHEN 'gb' THEN 1073741824 WHEN 'gib' THEN 1073741824
        WHEN 't' THEN 1099511627776 WHEN 'tb' THEN 1099511627776 WHEN 'tib' THEN 1099511627776
    END;
