"""What the driver holds when it forks its workers, every worker holds too (its pages are inherited)."""
import subprocess
import sys


def test_the_driver_imports_no_pandas_before_it_forks_its_workers():
    """pandas (~30 MB resident) is the reports' dependency: the run's modules load it only when the kind writes its
    report, after the rows are in, so the forked workers do not carry it."""
    code = ("import sys, benchmark.cli, benchmark.run.driver, benchmark.run.plan, benchmark.run.executors.pool, "
            "benchmark.run.executors.worker, benchmark.run.kinds, benchmark.run.kinds.semantic, "
            "benchmark.run.kinds.corruption; print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
