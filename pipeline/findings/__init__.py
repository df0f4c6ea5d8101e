"""Findings: analysis results turned into ranked conclusions with evidence, confidence and an action."""
