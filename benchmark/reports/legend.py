"""The heading under which every committed table page puts its legend, below its tables (the leaderboards'
layout, checked by tests/leaderboard/test_leaderboards_readme.py); shared by the leaderboard renderer and the
study pages it appends, which sit beneath it in the layers."""

LEGEND_TITLE = "How to read the tables above"
