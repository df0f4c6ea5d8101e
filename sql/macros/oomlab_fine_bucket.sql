-- A byte count's bucket at 128 steps per power of two (named by its lower bound; below 256 every value is its own
-- bucket): a relative width under 0.8 %, so that a device's distribution of request needs is kept in at most
-- 128 buckets per doubling, whatever the number of requests (agg_need_days). Portable (load/portable.py). Inline it
-- computes the power-of-two bucket four times (twenty logarithms): over many rows compute oomlab_pow2_guess, then
-- oomlab_pow2_settle, then oomlab_fine_of_pow2, each as a column (agg_prompt_sizes).
CREATE OR REPLACE MACRO oomlab_fine_bucket(x) AS
    oomlab_fine_of_pow2(x, oomlab_pow2_bucket(x));
