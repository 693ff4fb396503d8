"""Built-in defenses, written against the public Defense API (benchmark.defense)."""
