-- agg_prompt_sizes with each device's usable capacity (fct_prompt_capacity) and why a row is left out of the clean
-- threshold model (oomlab_prompt_exclusion: NULL when clean), the same rule as fct_prompt_requests' per request.
CREATE OR REPLACE VIEW fct_prompt_sizes AS
SELECT s.*, c.capacity_bytes,
       oomlab_prompt_exclusion(s.cost_unknown, s.names_neighbour, s.fragmented, c.persistent_neighbour_bytes)
           AS excluded_because
FROM agg_prompt_sizes AS s
JOIN fct_prompt_capacity AS c USING (instance, gpu_index);
