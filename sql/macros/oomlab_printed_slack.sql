-- The most a size read back from an OOM message can differ from the bytes it stood for: half a unit of the
-- last digit PyTorch prints (c10/cuda/CUDACachingAllocator.cpp format_size: whole bytes up to 1 KiB, then two
-- decimals of KiB up to 1 MiB, of MiB up to 1 GiB, of GiB above). A logged byte count is exact, and gets the
-- same allowance: which of two agreeing numbers was printed is not always known, and the allowance of the
-- coarser one is what decides.
CREATE OR REPLACE MACRO oomlab_printed_slack(b) AS
    CASE WHEN b IS NULL OR b <= 1024 THEN 0
         WHEN b <= 1048576 THEN 0.005 * 1024
         WHEN b <= 1073741824 THEN 0.005 * 1048576
         ELSE 0.005 * 1073741824 END;
