-- The power-of-two bucket of a count, named by its lower bound b (b <= x < 2b; 0 holds 0; NULL for NULL or a
-- negative x): the guess 2^floor(log2 x), moved by one power where Spark's log2 is off, so that both engines put a
-- count in the same bucket (load/portable.py runs this macro on Spark too). Inline, the guess is computed five
-- times: over many rows compute oomlab_pow2_guess as a column and oomlab_pow2_settle from it.
CREATE OR REPLACE MACRO oomlab_pow2_bucket(x) AS
    oomlab_pow2_settle(x, oomlab_pow2_guess(x));
