"""Exact bilinear range over boxes of source coordinates: lives in the transformation registry
(:mod:`benchmark.transformations.bounds.bilinear`), re-exported here for semanify's callers."""
from benchmark.transformations.bounds.bilinear import bilinear_at, bilinear_range

__all__ = ["bilinear_at", "bilinear_range"]
