"""OOM messages of every framework and PyTorch generation: cleaned, matched to a signature, read."""
