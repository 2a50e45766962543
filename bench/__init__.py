"""Benchmarks of devstack on the real local engines (not part of CI): `python -m bench.run`."""
