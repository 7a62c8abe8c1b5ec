"""The package's version: what results, traces and sweep points record as ``libra_des``'s.

It lives here, below every layer, so no module inside the package imports the package face
(``libra_des/__init__.py``) for it; the face re-exports it. Keep it equal to
``pyproject.toml``'s ``version``.
"""

from __future__ import annotations

__version__ = "0.1.0"
