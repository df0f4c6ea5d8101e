"""Text logs: the marker search over a whole file and what each found line says."""
