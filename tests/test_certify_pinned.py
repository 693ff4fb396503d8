"""Speed work must not change any result: the same seed gives bit-identical certificates and PREDICT outcomes.

The expected values in ``tests/data/pinned_certificates.json`` were computed on main *before* the
performance changes of issue 13 (``python tests/test_certify_pinned.py --write`` regenerates them; do
that only for a deliberate change of results, never to make a speed change pass).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

FIXTURE = Path(__file__).parent / "data" / "pinned_certificates.json"
#: (defense, transformation): one case per sampling path (parameter noise, pixel noise + slices,
#: contrast, semantic noise with closed-form / interval / exact suprema)
CASES = [("tss", "gaussian_blur"), ("tss", "rotation"), ("tss", "contrast_brightness"), ("tss", "translation"),
         ("gsmooth", "gaussian_blur"), ("gsmooth", "rotation"), ("gsmooth", "pixelate"),
         ("gsmooth", "defocus_blur")]
EXAMPLES = (0, 7)


def pinned_results(defense: str, transformation: str, device: str = "cpu") -> dict:
    """Certificates and PREDICT labels of two smoke-profile examples from one seeded generator."""
    from benchmark.certify.smoothing import SmoothingParams, sample_ledger
    from benchmark.context import Context
    from benchmark.datasets import get_dataset
    from benchmark.defenses import get_defense_class
    from benchmark.models.store import ModelStore
    from benchmark.suites import load_suite
    from benchmark.transformations import get_transformation

    suite = load_suite("semantic")
    p = suite.profile("smoke")
    task = suite.tasks(p, 0, transformations=[transformation], defenses=[defense])[0]
    t, ds = get_transformation(transformation), get_dataset("digits")
    ctx = Context(dataset=ds, transformation=t, smoothing=SmoothingParams.from_profile(p),
                  store=ModelStore(allow_train=False), device=device, budgets=task.budgets,
                  profile={**p.to_dict(), "surrogate_quality": False})
    d = get_defense_class(defense)(**task.defense_config)
    d.prepare(ctx)
    x, _ = ds.load("test")
    gen = torch.Generator().manual_seed(1234)
    out = []
    for i in EXAMPLES:
        with sample_ledger() as ledger:
            certs = d.certify(x[i:i + 1], t, list(task.budgets), gen)
            labels = d.predict(x[i:i + 2], t, gen)
        out.append({"example": i, "certificates": [c.to_json() for c in certs], "predict": labels.tolist(),
                    "ledger": dict(ledger)})
    return json.loads(json.dumps(out))  # tuples -> lists, float keys as written


@pytest.mark.parametrize("defense,transformation", CASES)
def test_certificates_unchanged(defense: str, transformation: str) -> None:
    expected = json.loads(FIXTURE.read_text())[f"{defense}/{transformation}"]
    assert pinned_results(defense, transformation) == expected


if __name__ == "__main__" and "--write" in sys.argv:
    FIXTURE.write_text(json.dumps({f"{d}/{t}": pinned_results(d, t) for d, t in CASES}, indent=1) + "\n")
