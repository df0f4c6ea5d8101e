-- A source whose rows arrive in pieces (a Prometheus pull): its counts and note once the last piece is in.
UPDATE sources SET rows = $rows, rejects = $rejects, note = $note WHERE source_id = $source_id;
