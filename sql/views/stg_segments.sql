-- segments as the snapshot views and queries read them: the allocator segments of each snapshot's final
-- state, as stored.
CREATE OR REPLACE VIEW stg_segments AS
SELECT * FROM segments;
