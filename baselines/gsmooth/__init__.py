"""GSmooth (Hao et al., ICML 2022): generalized randomized smoothing through a surrogate's semantic layer.

This package holds the certificate mathematics (``semantic_noise``, ``regions``,
``certificates``); the surrogate, its training and the defense build on them.
"""
