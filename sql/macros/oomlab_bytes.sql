-- A byte count from an integer, a float or a string with a unit ('14.23 GiB', '512MB', '1.5e9'); NULL when it is
-- none of these or does not fit a BIGINT (2^63 bytes is far beyond any device).
CREATE OR REPLACE MACRO oomlab_bytes(v) AS
    coalesce(
        try_cast(v AS BIGINT),
        try_cast(round(
            try_cast(regexp_extract(CAST(v AS VARCHAR),
                '^\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$', 1) AS DOUBLE)
            * oomlab_unit_bytes(regexp_extract(CAST(v AS VARCHAR),
                '^\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$', 2))
        ) AS BIGINT)
    );
