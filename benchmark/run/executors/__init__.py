"""Executors evaluate work units and deliver prepared-task info and rows to a RowSink:
``local`` (this process, a progress bar per task) and ``ray`` (a Ray cluster, imported lazily)."""
