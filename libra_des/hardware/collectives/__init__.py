"""Communication pricing: the collective catalogue and its α-β curves, NCCL's tuning model,
the all-to-all(v) message model and DeepEP-class dispatch, ECMP collision factors."""
