"""Paths the tests share: the repository root, the tests' data folder and the real data beside the repository
(``shared/data`` beside this checkout, or beside the main checkout when this is a git worktree)."""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEST_DATA = REPO / "tests" / "data"


def _shared_data() -> Path:
    roots = [REPO]
    git = REPO / ".git"
    if git.is_file() and git.read_text().startswith("gitdir:"):  # a worktree: "gitdir: MAIN/.git/worktrees/NAME"
        roots.append(Path(git.read_text()[len("gitdir:"):].strip()).parents[2])
    candidates = [root.parent / "shared" / "data" for root in roots]
    return next((c for c in candidates if c.is_dir()), candidates[0])


SHARED_DATA = _shared_data()
