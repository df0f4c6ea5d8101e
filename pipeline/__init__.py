"""oomlab: find out why GPU inference services run out of memory."""

__version__ = "0.1.0"
