"""Parse stage: read raw inputs into typed records or staged relations."""
