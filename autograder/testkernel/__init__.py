"""Loaded in the test kernel: the probe to the student kernel, test helpers and the numerical policy."""
