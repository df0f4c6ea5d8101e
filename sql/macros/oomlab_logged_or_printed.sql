-- One size of an OOM that a request-log row states twice: in a field (`logged`) and in the OOM message it
-- carries (`printed`, read back from PyTorch's text, to half a unit of its last digit: oomlab_printed_slack).
-- A number is known to the digits it was written with. Ingest keeps bytes, but a size written in a coarser unit
-- lands on that unit's grid: 0.01 GiB of a `_gib` field with two decimals is 10,737,418 bytes, give or take half
-- a byte (oomlab_logged_step). Where that grid is coarser than the message's print and the two agree within it,
-- the field is the message's number rounded coarser, and the message's is taken: "requested_gib": 0.01 and
-- "free_gib": 0.01 beside "Tried to allocate 14.00 MiB ... of which 6.00 MiB is free" read as a request that fit
-- (fleet 106426 of `bench/truth.py --seed 106400`). Otherwise the logged value: exact bytes from an OOM observer
-- are finer than any print, and a field that disagrees with the message beyond both roundings measured something
-- else (the real H200 capture's observer saw 4.41 GiB allocated where the message says 4.49 GiB).
CREATE OR REPLACE MACRO oomlab_logged_or_printed(logged, printed) AS
    CASE WHEN logged IS NOT NULL AND printed IS NOT NULL
              AND oomlab_logged_step(logged) > 2 * oomlab_printed_slack(printed)
              AND abs(logged - printed) <= oomlab_logged_step(logged)
         THEN printed
         ELSE coalesce(logged, printed) END;
