"""moe simulation."""
