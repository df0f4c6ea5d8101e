"""GPU telemetry as the field writes it: nvidia-smi CSV, Prometheus scrapes, vLLM start-up reports."""
