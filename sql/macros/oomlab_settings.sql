-- The constants of sql/ and the Python that shares them, one macro each under the name Python uses (DuckDB
-- folds `NAME()` to its literal, so a view runs as if the value were written in place). This file is their
-- only definition: oomlab.load.settings reads the literals from it (a number, a list, `x::DOUBLE`, an
-- INTERVAL or a TIMESTAMP), and a test checks that DuckDB and Python agree on every one. The one exception to
-- one object per file: settings are read together, and each is too small for a file of its own.

-- Memory alert levels (docs/domain.md: notice at 70-75 %, warning at 85-90 %, critical at 95 %) as fractions of
-- the card: the water levels' time above each, the alert rules' thresholds and the report's bands. DOUBLE,
-- as Python's floats.
CREATE OR REPLACE MACRO ALERT_LEVELS() AS [0.70, 0.85, 0.95]::DOUBLE[];
-- Predictive alert: free memory below this multiple of the peak need of the largest recent request
-- (docs/domain.md: free < 1.2 x the peak need of the largest request).
CREATE OR REPLACE MACRO ALERT_NEED_FACTOR() AS 1.2::DOUBLE;
-- Seconds a request (or a telemetry sample) holds its level until the next one, but not across a longer gap:
-- the device may have been idle or down, and we do not know what it held then.
CREATE OR REPLACE MACRO MAX_HOLD_S() AS 1800;
-- The incident timeline draws 3 hours either side of an OOM in at most 1500 points (report/downsample.py), 250 an
-- hour: an instance's hour with no more requests than that is drawn whole, so the aggregate tier keeps its requests
-- whole (agg_incident_detail); a busier hour is drawn by its minutes' first, highest and lowest requests
-- (agg_incident_minutes), what the downsampling keeps of its 43 s buckets. A test holds this to the report's numbers.
CREATE OR REPLACE MACRO INCIDENT_HOUR_REQUESTS() AS 250;

-- fct_request_baselines cuts each device's time span into this many buckets: fine enough to place a restart
-- within 1/4096 of the span, few enough that the restart search stays small whatever the number of requests.
CREATE OR REPLACE MACRO BASELINE_BUCKETS() AS 4096;
-- ... each at least this many microseconds (1 ms): logs stamp request times to the millisecond, so a finer
-- bucket would only split requests logged in the same millisecond.
CREATE OR REPLACE MACRO MIN_BUCKET_US() AS 1000;
-- A restart is measured against the lowest baseline of this many buckets before: one bucket whose requests
-- kept a temporary tensor alive does not raise the level a restart is measured against.
CREATE OR REPLACE MACRO BASELINE_LOOKBACK_BUCKETS() AS 5;
-- A restart: the allocated level fell back at least this share of the way from that baseline to what a fresh
-- process of the version holds (its lowest baseline so far). A restart frees all a leak piled up and returns
-- to about the fresh level (share ~1); a request never frees what the requests before it left, so no fall
-- happens without one. Half the way leaves room for a fresh process that warms up a little higher.
CREATE OR REPLACE MACRO RESTART_RETURN_SHARE() AS 0.5;
-- ... and by at least 64 MiB, so that the jitter of a small baseline is no restart (unless an OOM came just
-- before the fall: a process that crashes at its OOM gives back what it leaked, however little; see
-- fct_request_baselines).
CREATE OR REPLACE MACRO BASELINE_DROP_MIN_BYTES() AS 67108864;
-- An instance that logged nothing this long was restarted or down: its next request starts a new process
-- lifetime. Python uses the same span: an OOM logged this long after a lifetime's last request belongs to no
-- lifetime we saw (oomlab.analyses.fleet.classify).
CREATE OR REPLACE MACRO LIFETIME_GAP() AS INTERVAL 6 HOUR;

-- fct_leak_windows cuts each lifetime into one window per this many requests (a window's minimum over fewer
-- is one request's level, not a baseline) ...
CREATE OR REPLACE MACRO LEAK_REQUESTS_PER_WINDOW() AS 5;
-- ... and at most this many windows, so that a week-long lifetime and a 20-second capture both get a fit of
-- the same size.
CREATE OR REPLACE MACRO LEAK_MAX_WINDOWS() AS 48;
-- The baseline at a lifetime's start and end: the lowest over its first / last this many buckets, as the
-- restart search looks back (one bucket with a temporary tensor alive does not set the level).
CREATE OR REPLACE MACRO LEAK_END_BUCKETS() AS 5;

-- fct_water_requests starts a new lifetime where allocated memory drops below what the previous request left
-- by the larger of 256 MiB and 2 % of the card: well above allocator rounding and request jitter.
CREATE OR REPLACE MACRO RESTART_DROP_MIN_BYTES() AS 268435456;
CREATE OR REPLACE MACRO RESTART_DROP_SHARE() AS 0.02;

-- fct_prompt_requests counts a request whose allocated_before is more than 64 MiB above the lowest of its
-- deployment as on a raised baseline: a leak or resident growth left less room. 64 MiB is well under 1 % of
-- any card here.
CREATE OR REPLACE MACRO RAISED_BASELINE_BYTES() AS 67108864;
-- Such a request is sized as it would be on a fresh process (its size plus the rise over the bytes a unit of
-- size costs, fitted per model version on successful requests) when that cost is known to 5 %: a rise that
-- took a fifth of the headroom then moves the size by at most 1 % of the threshold, the spread within which
-- requests near it go either way. A cost known worse than that leaves the request out.
CREATE OR REPLACE MACRO SIZE_COST_MAX_ERROR() AS 0.05;
-- ... and OOMs with at least twice the request and 10 % of the card reserved but unallocated: the memory was
-- there, in pieces (smaller slack is normal caching).
CREATE OR REPLACE MACRO FRAGMENTED_REQUEST_MULTIPLE() AS 2;
CREATE OR REPLACE MACRO FRAGMENTED_CARD_SHARE() AS 0.1;

-- The prompt-risk model learns from at most this many clean requests (~2 s of 5-fold CV on two cores; a boundary
-- this sharp needs no more): the ones with the lowest sample_key in the window (q_prompt_clean_requests), out of the
-- sample agg_prompt_sample keeps per day.
CREATE OR REPLACE MACRO PROMPT_MODEL_ROWS() AS 50000;

-- fct_oom_instance_limits: the typical large request is this quantile of what successful requests added at
-- their peak; the few largest above it are outliers, not the size to plan for.
CREATE OR REPLACE MACRO LARGE_REQUEST_QUANTILE() AS 0.95;
-- fct_oom_neighbours_seen takes the last nvidia-smi round at or before a failure only if it is at most this
-- old: an older list of processes says little about who held the card when it failed.
CREATE OR REPLACE MACRO NEIGHBOUR_ROUND_MAX_AGE() AS INTERVAL 15 MINUTE;
-- Memory a process holds outside PyTorch's counters: the CUDA context and its libraries' workspaces (docs/domain.md:
-- a few hundred MB to about 1 GiB). What a process can hold alone on a card is its total less this much.
CREATE OR REPLACE MACRO CONTEXT_ALLOWANCE_BYTES() AS 1073741824;
-- The most that context takes: before CUDA 11.7's lazy module loading (PyTorch < 1.13, whose OOM message names no
-- process) every kernel of the libraries was loaded at start, over 1,000 MB (PyTorch's maintainers in
-- pytorch/pytorch#107667), about 1.5 GB on a 2018 card (#4918). Memory in use on the card beyond what this process
-- reserved and this much is held by processes its OOM message does not name (fct_oom_context.unnamed_other_bytes;
-- the snapshot classifier the same); less is one process's own (real: corpus oom/065, a T4 notebook of that era
-- with 1.27 GiB in use outside PyTorch's 12.57 GiB reserved).
CREATE OR REPLACE MACRO CONTEXT_MAX_BYTES() AS 1610612736;

-- Weekly buckets count from this Monday, so that they are ISO weeks (Monday 00:00 UTC): rpt_oom_rate_weekly
-- and the week-over-week numbers of oomlab.analyses.fleet.aggregates.
CREATE OR REPLACE MACRO WEEK_ORIGIN() AS TIMESTAMP '2024-01-01';

-- Every block the caching allocator hands out is a multiple of 512 bytes (kMinBlockSize); a snapshot's trace
-- records the requested size, which the snapshot views and analyses round up to it.
CREATE OR REPLACE MACRO BLOCK_ROUNDING_BYTES() AS 512;

-- The forecast's expected OOMs assume the request mix of this many last days will continue ...
CREATE OR REPLACE MACRO RECENT_NEEDS_DAYS() AS 7;
-- ... at a daily rate taken over at least this many seconds: requests seconds apart are no rate of millions
-- a day.
CREATE OR REPLACE MACRO MIN_RATE_SPAN_S() AS 3600;

-- fct_request_flags: values a request log may hold but no real service logs, kept and flagged (not set aside).
-- A device_total below this (512 MiB) is no card an LLM is served from: the smallest vGPU profile has 1 GB, and
-- a card's size in MiB or KiB taken for bytes (24 GiB as 24576 or 25165824) lands far below it.
CREATE OR REPLACE MACRO CARD_MIN_BYTES() AS 536870912;
-- ... above this (4 TiB) neither: four times the largest accelerator announced (1 TB), while a size counted 1024
-- times too large (KiB taken for bytes, a MiB figure scaled twice) lands above it for any card over 4 GiB.
CREATE OR REPLACE MACRO CARD_MAX_BYTES() AS 4398046511104;
-- A latency above a day: even a million generated tokens at 12 tokens a second, far below any GPU's decode
-- rate for one sequence, finish within it; such a value is a timestamp or a unit slip, not a request's time.
CREATE OR REPLACE MACRO IMPLAUSIBLE_LATENCY_MS() AS 86400000;

-- A time a GPU log can carry: not before CUDA existed (CUDA 1.0, 2007; an epoch-0 or year-1 date is a unit or
-- parsing slip) and not in 2100 or later (year 9999 is a placeholder, 2106 is where 32-bit epoch seconds end, and
-- every engine's date arithmetic is exact well past it). The bounds are fixed, never the machine's clock: a clock
-- months behind the data must not drop the data, at ingest or when read. A request row outside is a reject with
-- the reason; the data's range ignores such rows.
CREATE OR REPLACE MACRO TS_EARLIEST() AS TIMESTAMP '2007-01-01';
CREATE OR REPLACE MACRO TS_LATEST() AS TIMESTAMP '2100-01-01';
-- How far the data may run ahead of the machine's clock before ingest says so (once; it changes nothing): clock
-- skew and zone slips are hours, not a year.
CREATE OR REPLACE MACRO TS_AHEAD() AS INTERVAL 366 DAY;

-- The longest line a request record can take (16 MiB, also DuckDB read_json's default maximum_object_size): one
-- request's fields, even with its whole prompt text logged, are at most the longest served context (about 2M
-- tokens at about 4 bytes each: 8 MB). A longer line is a reject of that line (read with bounded memory), not a
-- reason to fail the file or to hold a line without a newline in memory.
CREATE OR REPLACE MACRO MAX_RECORD_BYTES() AS 16777216;
