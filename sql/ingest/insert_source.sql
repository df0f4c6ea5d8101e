INSERT INTO sources (source_id, path, content_hash, hash_algorithm, kind, ingested_at, rows, rejects, size_bytes, labels, note)
VALUES ($source_id, $path, $content_hash, $hash_algorithm, $kind, $ingested_at, $rows, $rejects, $size_bytes, $labels, $note);
