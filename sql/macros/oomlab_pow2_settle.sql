-- The power-of-two bucket of a count x from its guess (oomlab_pow2_guess(x), at most one power off): b with
-- b <= x < 2b, 0 for 0, NULL for NULL or a negative x. Portable (load/portable.py).
CREATE OR REPLACE MACRO oomlab_pow2_settle(x, guess) AS
    CASE WHEN x = 0 THEN 0
         WHEN x > 0 THEN
             CASE WHEN 2 * guess <= x THEN 2 * guess
                  WHEN guess > x THEN guess // 2
                  ELSE guess END
    END;
