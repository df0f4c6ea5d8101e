"""PyTorch memory snapshots: sniffed, loaded without running anything, turned into Arrow tables."""
