"""The fabric: topology files and levels, the grown topology and its routes, and the rates the
analytic cost models read from it (plain data about the cluster; no pricing)."""
