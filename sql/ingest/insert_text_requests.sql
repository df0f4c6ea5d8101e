-- The request lines of one text log (ingest/text.py), registered as `new_text_requests` with the table's columns.
INSERT INTO text_requests BY NAME SELECT * FROM new_text_requests;
