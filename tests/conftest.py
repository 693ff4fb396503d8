"""Test setup: one torch thread per test process and runs in that process (the CI machine has 2 cores)."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("BENCH_WORKERS", "1")  # runs evaluate in the test process (tests of the pool set workers)

import torch  # noqa: E402

torch.set_num_threads(1)
