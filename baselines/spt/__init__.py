"""IndivSPT / DistSPT: transformation smoothing with a bounded interpolation error (Fischer et al. 2020)."""
