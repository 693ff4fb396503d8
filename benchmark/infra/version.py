"""The package version, here (not in ``benchmark/__init__.py``) so that infra records it in every run without
importing the root package, whose lazy ``benchmark.evaluate`` sits above the run loop."""
__version__ = "0.1.0"
