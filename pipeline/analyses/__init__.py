"""Analyses: library functions over the database views that return DataFrames or frozen dataclasses."""
