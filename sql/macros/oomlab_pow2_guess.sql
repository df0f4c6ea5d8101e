-- The first guess at a positive count's power-of-two bucket, 2^floor(log2 x) (NULL unless x > 0): exact in DuckDB
-- below 2^50, one power off on Spark where ln x / ln 2 rounds below an integer (log2(8) = 2.9999999999999996
-- there); oomlab_pow2_settle corrects it. A macro of its own so that a query over many rows computes it once, as a
-- column, and settles from that column: the settled bucket names its guess five times and a fine bucket its
-- settled bucket four, so inline that is twenty logarithms and powers a row, and on Spark an expression so large
-- that the JVM leaves the generated code uncompiled (agg_prompt_sizes: 94 s instead of 27 s over 16.6M rows).
-- Portable (load/portable.py).
CREATE OR REPLACE MACRO oomlab_pow2_guess(x) AS
    CASE WHEN x > 0 THEN CAST(2 ** floor(log2(x)) AS BIGINT) END;
