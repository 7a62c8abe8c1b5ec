"""Device profiles: the schema, measurement importers (nccl-tests, Vidur, Kineto), fits with
cross-validation, a profile replayed through the cost model, the profile-vs-GPU check."""
