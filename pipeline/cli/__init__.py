"""The `oomlab` command line: click commands and terminal rendering, nothing else."""
