"""Benchmarks: each prints a table of ratios measured side by side in one run.

Speed and memory targets live here, never in timed tests.
"""
