"""Measure this machine with torch and write a fitted, cross-validated profile.

``libra-des calibrate`` (and ``python -m calibration.harness``) run here. torch is imported
inside functions only: importing this package, or ``libra-des calibrate --help``, never
loads it. :mod:`.sizes` says what is measured, :mod:`.kernels` times kernels on one device,
:mod:`.host` times the MoE host stages and their per-call costs, :mod:`.ranks` runs the
collectives, all-to-all and kernel-under-collective interference on
spawned ranks, :mod:`.machine` describes the host, :mod:`.run` ties them to the fitter, and
:mod:`.page` draws ``validation.html``.
"""
