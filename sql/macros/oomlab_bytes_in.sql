-- A byte count from a value of a column whose unit is known (a field mapping's `:MiB`, a name ending in `_mib`):
-- a bare number counts `per_unit` bytes, rounded to whole bytes (81050.5 MiB); a string with its own unit
-- ('14.23 GiB') keeps it. NULL when it is none of these or does not fit a BIGINT once scaled, as oomlab_bytes. A
-- sign is read (a negative size is then set aside as impossible, as oomlab_bytes' integers are).
CREATE OR REPLACE MACRO oomlab_bytes_in(v, per_unit) AS
    try_cast(round(
        try_cast(regexp_extract(CAST(v AS VARCHAR),
            '^\s*([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$', 1) AS DOUBLE)
        * CASE regexp_extract(CAST(v AS VARCHAR),
                   '^\s*([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$', 2)
              WHEN '' THEN per_unit
              ELSE oomlab_unit_bytes(regexp_extract(CAST(v AS VARCHAR),
                   '^\s*([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$', 2))
          END
    ) AS BIGINT);
