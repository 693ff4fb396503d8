"""Tables computed from a run's rows: the summary (certified/empirical accuracy per budget), the
corruption table, the survival table of unproven certificates and the sweep table."""
