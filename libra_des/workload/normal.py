"""The standard normal CDF and quantile (``ndtr``, ``ndtri``), as scipy.special gives them.

Named here so that the length laws read one place for the normal law's two functions.
"""

from __future__ import annotations

from scipy.special import ndtr, ndtri

__all__ = ["ndtr", "ndtri"]
