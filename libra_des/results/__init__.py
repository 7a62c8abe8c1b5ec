"""What a simulation produces and how it is checked and stored: ``result.json`` metrics,
plausibility checks, result and sweep tables, Chrome traces, output folders."""
