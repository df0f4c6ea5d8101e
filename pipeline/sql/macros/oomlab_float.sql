-- A float from a number or a numeric string.
CREATE OR REPLACE MACRO oomlab_float(v) AS try_cast(v AS DOUBLE);
