"""Calibration and Bayesian inference over simjax simulators (built on `sim`)."""
