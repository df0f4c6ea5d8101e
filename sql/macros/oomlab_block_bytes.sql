-- A size recorded in a snapshot's trace (the requested bytes) as the block the caching allocator handed out:
-- rounded up to a whole multiple of BLOCK_ROUNDING_BYTES (512, kMinBlockSize).
CREATE OR REPLACE MACRO oomlab_block_bytes(size) AS
    (size + BLOCK_ROUNDING_BYTES() - 1) // BLOCK_ROUNDING_BYTES() * BLOCK_ROUNDING_BYTES();
