"""Several sequential streams side by side (TSS slice endpoints in one batch per look): ``estimate_many``
decides every stream exactly as ``estimate`` alone, ``sample_counts_many`` packs inputs into batches
without losing or moving a sample, and the grouped slice walk claims the same coverage as one endpoint at
a time."""
import numpy as np
import pytest
import torch

from baselines.tss.slicing import chain_coverage, chain_coverage_grouped
from benchmark.certify import sequential as sq
from benchmark.certify.smoothing import sample_counts_many, sample_ledger

SETTINGS = sq.SequentialSettings()


def _streams(ps, seed, num_classes=3, length=2_000):
    """Pre-drawn label streams per p (class 0 with probability p): the same samples whoever reads them."""
    rng = np.random.default_rng(seed)
    out = []
    for p in ps:
        probs = [p] + [(1 - p) / (num_classes - 1)] * (num_classes - 1)
        out.append(rng.choice(num_classes, size=length, p=probs))
    return out


def _reader(streams):
    """draw_many over pre-drawn streams, and the positions it has read to."""
    pos = [0] * len(streams)

    def draw_many(ks):
        out = []
        for i, k in enumerate(ks):
            out.append(np.bincount(streams[i][pos[i]:pos[i] + k], minlength=3))
            pos[i] += k
        return np.stack(out)
    return draw_many, pos


def test_estimate_many_decides_each_stream_as_estimate_alone():
    ps = [1.0, 0.97, 0.9, 0.8, 0.6, 0.5, 0.3]
    thresholds = [[0.85], [0.7, 0.95], [0.9], [0.6, 0.8], [0.55], [0.9], [0.6]]
    streams = _streams(ps, 0)
    draw_many, pos = _reader(streams)
    many = sq.estimate_many(draw_many, 0, SETTINGS, 1_000, 0.001, thresholds)
    for i, est in enumerate(many):
        at = [0]

        def draw(k, i=i, at=at):
            c = np.bincount(streams[i][at[0]:at[0] + k], minlength=3)
            at[0] += k
            return c

        alone = sq.estimate(draw, 0, SETTINGS, 1_000, 0.001, thresholds[i])
        assert est.record == alone.record and est.p_lower == alone.p_lower
        assert est.counts.tolist() == alone.counts.tolist() and pos[i] == at[0] == est.n
        assert sq.recompute(est.record, 0.001)[1] == []
    assert len({len(e.counts_a) for e in many}) > 1  # streams stopped at different looks


def test_a_budget_cuts_undecided_streams_on_the_same_draws_and_the_replay_accepts_only_such_a_cut():
    """``budget``: no look after the streams' draws together reach it; streams the rule has not stopped end
    undecided (``stopped: budget``, their bound below their threshold), on a prefix of the draws of no budget;
    decided streams are untouched; a budget never reached changes nothing."""
    ps, thresholds = [1.0, 0.62, 0.6], [[0.85], [0.6], [0.6]]  # one stops at once, two sit on their threshold
    streams = _streams(ps, 3, length=200_000)
    free = sq.estimate_many(_reader(streams)[0], 0, SETTINGS, 100_000, 0.001, thresholds)
    assert free[1].n > 2_000 and free[2].n > 2_000 and free[0].n < 200
    draw, pos = _reader(streams)
    cut = sq.estimate_many(draw, 0, SETTINGS, 100_000, 0.001, thresholds, budget=2_000)
    assert 2_000 <= sum(pos) < 2_000 + 2 * (cut[1].n - SETTINGS.first)  # stopped at the look that reached it
    assert cut[0].record == free[0].record and "stopped" not in cut[0].record
    for c, f, th in zip(cut[1:], free[1:], thresholds[1:]):
        assert c.record["stopped"] == sq.BUDGET_STOP and c.counts_a == f.counts_a[:len(c.counts_a)]
        assert c.p_lower <= th[0] and sq.recompute(c.record, 0.001) == (c.p_lower, [])
        unmarked = {k: v for k, v in c.record.items() if k != "stopped"}
        assert any("stops at" in m for m in sq.recompute(unmarked, 0.001)[1])  # a cut needs its mark
    decided = dict(free[0].record, stopped=sq.BUDGET_STOP)  # a stream the rule stopped cannot claim a budget cut
    assert any("budget" in m for m in sq.recompute(decided, 0.001)[1])
    never = sq.estimate_many(_reader(streams)[0], 0, SETTINGS, 100_000, 0.001, thresholds, budget=10 ** 9)
    assert [e.record for e in never] == [e.record for e in free]


def test_sample_counts_many_packs_batches_without_losing_a_sample():
    """Inputs 0..K-1 labelled with their own index: every count lands on its input, no batch exceeds
    batch_size, and the ledger counts every sample once."""
    sizes = []

    def labels(pieces, gen):
        sizes.append(sum(k for _, k in pieces))
        return torch.cat([torch.full((k,), i, dtype=torch.int64) for i, k in pieces])

    ks = [5, 0, 300, 17, 64, 1]
    with sample_ledger() as ledger:
        counts = sample_counts_many(labels, ks, len(ks), 64, torch.Generator().manual_seed(0))
    assert counts.tolist() == np.diag(ks).tolist()
    assert max(sizes) <= 64 and sum(sizes) == sum(ks) and ledger["certify"] == sum(ks)
    assert len(sizes) == -(-sum(ks) // 64)  # packed: as few batches as the total allows


def test_sample_counts_many_checks_the_labels_shape():
    def short(pieces, gen):
        return torch.zeros(1, dtype=torch.int64)

    with pytest.raises(ValueError, match="shape"):
        sample_counts_many(short, [3, 4], 2, 8, torch.Generator())


@pytest.mark.parametrize("group", [1, 2, 3, 8, 100])
def test_grouped_walk_claims_what_the_one_at_a_time_walk_claims(group):
    rng = np.random.default_rng(group)
    for _ in range(200):
        n_ends = 2 * int(rng.integers(1, 8)) + 1
        row = rng.random(n_ends) < 0.85
        judged = []

        def group_ok(idx):
            oks = []
            for i in idx:
                judged.append(i)
                oks.append(bool(row[i]))
                if not oks[-1]:
                    break
            return oks

        one = chain_coverage(n_ends, 1.0, n_ends / 2, lambda i: bool(row[i]))
        assert chain_coverage_grouped(n_ends, 1.0, n_ends / 2, group_ok, group) == one
        order = sq.centre_out_order(n_ends)[1:]
        first_fail = next((j for j, i in enumerate(order) if not row[i]), len(order))
        assert judged == order[:min(first_fail + 1, len(order))]  # never judges past the first failure
