"""Paths the tests share: the repository root, the tests' data folder and the real data beside the repository."""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEST_DATA = REPO / "tests" / "data"
SHARED_DATA = REPO.parent / "shared" / "data"
