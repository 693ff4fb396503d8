"""Shared randomized-smoothing statistics: confidence bounds, radii, CERTIFY/PREDICT."""
