INSERT INTO sources (source_id, path, sha256, kind, ingested_at, rows, rejects, size_bytes, labels, note)
VALUES ($source_id, $path, $sha256, $kind, $ingested_at, $rows, $rejects, $size_bytes, $labels, $note);
