"""The package's version, below every layer that records it (result files, sweep keys, the
report); the package face re-exports it as ``libra_des.__version__``."""

__version__ = "0.1.0"
