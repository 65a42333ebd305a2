"""Measurements the tuner takes: latency histograms (and the server's memory, elsewhere)."""
