-- A byte count from an integer, a float or a string with a unit ('14.23 GiB', '512MB', '1.5e9').
CREATE OR REPLACE MACRO oomlab_bytes(v) AS
    coalesce(
        try_cast(v AS BIGINT),
        CAST(round(
            try_cast(regexp_extract(CAST(v AS VARCHAR),
                '^\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$', 1) AS DOUBLE)
            * oomlab_unit_bytes(regexp_extract(CAST(v AS VARCHAR),
                '^\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$', 2))
        ) AS BIGINT)
    );
