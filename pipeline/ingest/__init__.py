"""Ingest stage: every input file through detect -> parse -> normalize -> load, one transaction per file."""
