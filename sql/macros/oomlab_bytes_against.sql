-- `v` as oomlab_format_bytes writes it, or in exact bytes when the rounding would show it equal to `other`
-- (a reason that says '24.00 GiB above 24.00 GiB' tells the reader nothing).
CREATE OR REPLACE MACRO oomlab_bytes_against(v, other) AS
    CASE WHEN oomlab_format_bytes(v) = oomlab_format_bytes(other) THEN printf('%d B', v)
         ELSE oomlab_format_bytes(v) END;
