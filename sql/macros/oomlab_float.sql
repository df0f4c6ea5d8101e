-- A float from a number or a numeric string; NULL for NaN and the infinities (no latency or rate is either), so
-- the row is a reject with its reason.
CREATE OR REPLACE MACRO oomlab_float(v) AS
    CASE WHEN isfinite(try_cast(v AS DOUBLE)) THEN try_cast(v AS DOUBLE) END;
