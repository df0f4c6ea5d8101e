"""A seeded generator of a realistic GPU inference fleet with planted, documented OOM causes."""
