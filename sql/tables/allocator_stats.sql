-- One row per moment and pool of what PyTorch's caching allocator said about itself: a
-- `torch.cuda.memory_summary()` table (origin `memory_summary`, in a text log or its own file) or a
-- `torch.cuda.memory_stats()` JSON (origin `memory_stats`). `pool` is `all`, `large` or `small`. Values are
-- the printout's current ones unless named peak or total; `exact_to_bytes` is the printed unit (a summary
-- floors sizes to whole KiB/MiB/GiB; 1 for memory_stats). `moment` numbers the printouts of one source;
-- `ts` is the line's timestamp, or --at, else NULL (a printout carries no time). `allocated_total_bytes`
-- (PyTorch's `Tot Alloc`) only grows within one process, so it orders moments that have no time.
CREATE TABLE IF NOT EXISTS allocator_stats (
    source_id              INTEGER NOT NULL,
    line                   BIGINT,
    moment                 INTEGER NOT NULL,
    ts                     TIMESTAMP,
    instance               VARCHAR,
    gpu_index              INTEGER,
    origin                 VARCHAR NOT NULL,
    pool                   VARCHAR NOT NULL,
    allocated_bytes        BIGINT,
    allocated_peak_bytes   BIGINT,
    allocated_total_bytes  BIGINT,
    freed_total_bytes      BIGINT,
    reserved_bytes         BIGINT,
    reserved_peak_bytes    BIGINT,
    active_bytes           BIGINT,
    active_peak_bytes      BIGINT,
    inactive_split_bytes   BIGINT,
    non_releasable_bytes   BIGINT,
    requested_bytes        BIGINT,
    allocations            BIGINT,
    allocations_total      BIGINT,
    segments               BIGINT,
    num_ooms               BIGINT,
    num_alloc_retries      BIGINT,
    exact_to_bytes         BIGINT
);
