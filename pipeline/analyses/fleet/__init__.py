"""Analyses over the fleet's database: OOM causes, leaks, jobs, periodicity, prompt risk, water levels."""
