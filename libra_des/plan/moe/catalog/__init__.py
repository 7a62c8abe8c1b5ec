"""The shipped MoE systems, one module each; each defines ``SYSTEM`` (a ``MoeSystem``)."""
