-- A count's fine bucket (see oomlab_fine_bucket) from its power-of-two bucket `pow2` (oomlab_pow2_bucket(x)),
-- for a query that has that bucket as a column already. Portable (load/portable.py).
CREATE OR REPLACE MACRO oomlab_fine_of_pow2(x, pow2) AS
    CASE WHEN x < 256 THEN x
         ELSE pow2 + (x - pow2) // (pow2 // 128) * (pow2 // 128)
    END;
