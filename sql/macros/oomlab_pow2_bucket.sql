-- The power-of-two bucket of a count, named by its lower bound b (b <= x < 2b; 0 holds 0; NULL for NULL or a
-- negative x). The first guess, 2^floor(log2 x), is exact in DuckDB below 2^50, but Spark computes log2 as
-- ln x / ln 2 (log2(8) = 2.9999999999999996 there), so the guess is moved by one power where it is off: the same
-- bucket on both engines (load/portable.py runs this macro on Spark too).
CREATE OR REPLACE MACRO oomlab_pow2_bucket(x) AS
    CASE WHEN x = 0 THEN 0
         WHEN x > 0 THEN
             CASE WHEN 2 * CAST(2 ** floor(log2(x)) AS BIGINT) <= x THEN 2 * CAST(2 ** floor(log2(x)) AS BIGINT)
                  WHEN CAST(2 ** floor(log2(x)) AS BIGINT) > x THEN CAST(2 ** floor(log2(x)) AS BIGINT) // 2
                  ELSE CAST(2 ** floor(log2(x)) AS BIGINT) END
    END;
