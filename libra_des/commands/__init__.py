"""One module per ``libra-des`` sub-command; each exposes ``register(subparsers)``."""
