-- Remove a source's bookkeeping row; its data rows are removed table by table before this.
DELETE FROM sources WHERE source_id = $source_id;
