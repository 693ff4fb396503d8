"""Leaderboard entries (one validated JSON per defense per suite and dataset), their verification and rendering.

An entry is produced only by the harness (``bench submit``), from the per-example rows of a run that
passed the submission checker; the rows ship beside the entry so that ``bench verify-entry`` can
recompute every number and re-run a random subset of examples.
"""
