-- An integer from an integer, a whole float ('8.0') or a string; NULL when it is not whole or not within BIGINT.
-- Through DOUBLE because a plain cast would round '8.5' to 9; counts here stay far below 2^53.
CREATE OR REPLACE MACRO oomlab_int(v) AS
    CASE WHEN try_cast(v AS DOUBLE) = floor(try_cast(v AS DOUBLE))
         THEN try_cast(try_cast(v AS DOUBLE) AS BIGINT) END;
