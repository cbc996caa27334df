"""Benchmarks: run explicitly (`python -m tests.benchmarks.<module>`), never part of the default test run."""
