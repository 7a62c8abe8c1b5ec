"""The foundation every layer may use, knowing nothing of scenarios: atomic writes
(``storage``), portable paths and content keys (``identity``), a process's start-up
(``startup``), the package's version (``version``)."""
