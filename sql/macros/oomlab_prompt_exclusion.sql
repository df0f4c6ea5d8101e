-- Why a request is left out of the clean threshold model (NULL: it is clean), from stg_prompt_requests' flags and
-- its device's persistent neighbour (fct_prompt_capacity): a raised baseline of unknown size cost first, then an
-- OOM naming an intermittent neighbour (a neighbour named in every OOM of the device is in its capacity instead),
-- then fragmentation. One rule for the per-request view and for the counts by size.
CREATE OR REPLACE MACRO oomlab_prompt_exclusion(cost_unknown, names_neighbour, fragmented, persistent_neighbour_bytes) AS
    CASE
        WHEN cost_unknown THEN 'raised_baseline'
        WHEN names_neighbour AND persistent_neighbour_bytes = 0 THEN 'neighbour_process'
        WHEN fragmented THEN 'fragmentation'
    END;
