"""Paper-style figures (matplotlib, an optional extra): one script per figure, and ``all``."""
