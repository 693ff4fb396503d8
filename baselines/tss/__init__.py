"""TSS-style transformation-specific smoothing (Li et al., CCS 2021)."""
from baselines.tss.defense import TSS

__all__ = ["TSS"]
