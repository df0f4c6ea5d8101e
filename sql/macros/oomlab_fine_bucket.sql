-- A byte count's bucket at 128 steps per power of two (named by its lower bound; below 256 every value is its own
-- bucket): a relative width under 0.8 %, so that a device's distribution of request needs is kept in at most
-- 128 buckets per doubling, whatever the number of requests (agg_need_days). Portable (load/portable.py).
CREATE OR REPLACE MACRO oomlab_fine_bucket(x) AS
    CASE WHEN x < 256 THEN x
         ELSE oomlab_pow2_bucket(x)
              + (x - oomlab_pow2_bucket(x)) // (oomlab_pow2_bucket(x) // 128) * (oomlab_pow2_bucket(x) // 128)
    END;
