"""Randomised scenarios: seeded fleets drawn over wide ranges, each with a machine-checkable truths.json."""
