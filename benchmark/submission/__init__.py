"""The submission path: check a defense, run the suite on it, write its leaderboard entry (``bench submit``)."""
