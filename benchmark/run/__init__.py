"""The one run loop: a suite expands to tasks (plan), tasks and example ids to work units (units),
an executor evaluates the units (executors: local, ray; shard selects a part), the run store collects
rows and the task kind renders the reports (kinds)."""
