"""training simulation."""
