-- frames as the snapshot queries read them: the frames of each stack, innermost (depth 0) first.
CREATE OR REPLACE VIEW stg_frames AS
SELECT * FROM frames;
