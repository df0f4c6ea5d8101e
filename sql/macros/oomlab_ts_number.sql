-- A time from a number `x` whose unit is `unit_us` microseconds (0: not stated, then told apart by magnitude as
-- oomlab_ts_epoch does). A number that is no moment in any unit (below TS_EARLIEST's epoch seconds: 2007 in
-- seconds, the smallest unit a moment is written in) is a time from the log's start: seconds, or the stated
-- unit, after `anchor` (--at: when the log started). Without `anchor` it stays an epoch (1970), which the plausibility
-- check rejects with the reason (normalize._check_sql).
CREATE OR REPLACE MACRO oomlab_ts_relative(x, unit_us) AS
    abs(x) * CASE WHEN unit_us = 0 THEN 1000000 ELSE unit_us END < epoch_us(TS_EARLIEST());

CREATE OR REPLACE MACRO oomlab_ts_number(x, anchor, unit_us) AS
    CASE
        WHEN anchor IS NOT NULL AND oomlab_ts_relative(x, unit_us)
            THEN anchor + to_microseconds(CAST(round(x * CASE WHEN unit_us = 0 THEN 1000000 ELSE unit_us END) AS BIGINT))
        WHEN unit_us = 0 THEN oomlab_ts_epoch(x)
        WHEN abs(x * unit_us) < 9e18 THEN make_timestamp(CAST(round(x * unit_us) AS BIGINT))
    END;
