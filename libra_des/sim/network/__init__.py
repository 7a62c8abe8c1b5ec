"""network simulation."""
