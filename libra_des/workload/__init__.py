"""Data: sample-length distributions, packing into packed sequences, MoE routing traces."""
