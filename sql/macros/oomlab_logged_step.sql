-- The coarsest step a logged byte count lies on (within the half byte ingest rounds to): 1, 0.1, 0.01 or 0.001
-- of a GiB, MiB or KiB, or a whole byte. Exact bytes an allocator counts are multiples of 512 bytes or 2 MiB, so
-- they lie on a KiB or MiB grid: a message prints sizes above 1 GiB coarser than that (its logged value wins), and
-- below it to 0.01 MiB, where the two can differ by less than that grid's step only.
CREATE OR REPLACE MACRO oomlab_logged_step(b) AS
    list_max(list_filter(
        [1073741824, 107374182.4, 10737418.24, 1073741.824, 1048576, 104857.6, 10485.76, 1048.576, 1024, 102.4,
         10.24, 1.024, 1],
        lambda s: abs(b - round(b / s) * s) <= 0.5));
