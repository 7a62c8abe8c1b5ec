"""A GPU's compute and memory: kernel roofline and tile models, grouped GEMMs, HBM arithmetic,
compute-communication interference."""
