-- The cut that keeps about `keep` of `n` uniformly hashed keys: the first 15 hex digits of an md5 below it fall
-- there with probability keep / n (16^15 = 2^60, exact in a double; in doubles on both engines, since a DuckDB
-- decimal would round the share at its scale). NULL when n is no more than `keep`: keep all.
-- Portable (load/portable.py): hex, lower and lpad read the same on Spark.
CREATE OR REPLACE MACRO oomlab_sample_cut(n, keep) AS
    CASE WHEN n > keep
         THEN lpad(lower(hex(CAST(floor(CAST(keep AS DOUBLE) / CAST(n AS DOUBLE) * CAST(1152921504606846976 AS DOUBLE))
                                  AS BIGINT))), 15, '0')
    END;
