-- stacks as the snapshot queries read them: the interned call stacks of each snapshot with their site.
CREATE OR REPLACE VIEW stg_stacks AS
SELECT * FROM stacks;
