"""Analyses of one memory snapshot: state, fragmentation, sites, leak suspects, OOM moments, timeline."""
