"""SimPy processes that execute plans: training steps, MoE prefill layers, network flows."""
