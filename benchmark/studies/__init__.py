"""Measurements about the harness rather than leaderboard results: ``bench perf`` (certify vs bare
Monte-Carlo cost), the paper's sample cap, the sequential rule's power floor and report, and the
pixel-space attack reference for undefended models."""
