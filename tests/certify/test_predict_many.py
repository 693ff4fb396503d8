"""PREDICT of several inputs side by side decides each input exactly as PREDICT alone on the same counts,
and packs the running inputs' samples into shared batches."""
import numpy as np
import torch

from benchmark.certify import sequential
from benchmark.certify.sequential import SequentialSettings
from benchmark.certify.smoothing import SmoothingParams, predict, predict_many

SETTINGS = SequentialSettings()


def _fixed_draw(i: int, look: int, k: int) -> np.ndarray:
    """Deterministic counts of stream i at a look: a clear winner, a tie, or a slow winner."""
    share = [(1.0, 0.0), (0.5, 0.5), (0.62, 0.38)][i % 3]
    a = int(round(k * share[0]))
    return np.array([a, k - a, 0])


def test_streams_side_by_side_decide_as_alone():
    m, cap, alpha = 7, 2000, 0.001
    looks = {i: 0 for i in range(m)}

    def draw_many(streams, k):
        out = []
        for i in streams:
            out.append(_fixed_draw(i, looks[i], k))
            looks[i] += 1
        return np.stack(out)

    together = sequential.predict_many(draw_many, SETTINGS, cap, alpha, m)
    for i in range(m):
        look = [0]

        def draw(k, i=i):
            look[0] += 1
            return _fixed_draw(i, look[0] - 1, k)

        alone = sequential.predict(draw, SETTINGS, cap, alpha)
        assert together[i][0] == alone[0] and together[i][2] == alone[2]
        assert together[i][1].tolist() == alone[1].tolist()
    assert {r[0] for r in together} == {0, None}  # winners accepted, ties abstain


def test_one_input_matches_predict_and_batches_are_shared():
    """With one input the draws are the very same as predict's; with several, each forward pass holds samples
    of several inputs (fewer, larger batches)."""
    params = SmoothingParams(n0=10, n=100, alpha=0.001, batch_size=64, n_predict=200, predict_rule="sequential")
    x = torch.tensor([[0.9], [0.2], [0.55]])
    sizes = []

    def labels(pieces, gen):
        xs = torch.cat([x[i:i + 1].expand(k, -1) for i, k in pieces])
        sizes.append(len(xs))
        return (xs[:, 0] + 0.3 * torch.randn(len(xs), generator=gen) > 0.5).long()

    single = predict(lambda k, gen: labels([(0, k)], gen), 2, params, torch.Generator().manual_seed(3))
    sizes.clear()
    many = predict_many(lambda pieces, gen: labels(pieces, gen), 1, 2, params, torch.Generator().manual_seed(3))
    assert many[0] == (single[0], single[1])
    sizes.clear()
    out = predict_many(labels, 3, 2, params, torch.Generator().manual_seed(3))
    assert [o[0] for o in out][:2] == [1, 0]
    assert max(sizes) > params.batch_size // 2  # the first look of all three inputs shares one batch
