"""Anytime-valid sequential decisions on a binomial proportion, for CERTIFY and PREDICT.

Rule ``cp-union``: Clopper-Pearson bounds at a geometric grid of looks, alpha spent over the looks by a
union bound. It is the construction of the adaptive sampling of Horvath, Mueller, Fischer & Vechev
("Boosting randomized smoothing with variance reduced classifiers", ICLR 2022: Clopper-Pearson at a few
sample sizes fixed in advance, Bonferroni over them), which Voracek ("Treatment of statistical estimation
problems in randomized smoothing for adversarial robustness", 2024, arXiv:2406.17830) compares with
betting confidence sequences; here with a geometric grid of looks and an uneven alpha split.

Derivation. The looks t_1 < ... < t_K = n (the cap) and levels alpha_1..alpha_K with sum <= alpha are
fixed before any sample is drawn (``schedule``). S_k = successes among the first t_k fresh samples and
L_k = CP_lower(S_k, t_k, alpha_k) (the alpha_k-quantile of Beta(S_k, t_k - S_k + 1)). For each k,
P(L_k > p) <= alpha_k (Clopper-Pearson), so by Boole's inequality

    P(exists k: L_k > p) <= sum_k alpha_k <= alpha.

Hence L*_T = max_{k <= T} L_k is a lower confidence bound on p at level alpha for *any* stopping time T,
in particular for a stop that depends on the samples seen so far: the event "L*_T > p" is contained in
the event above. A decision "certified at budget b iff L > tau_b" for every budget at once is therefore
as valid as the fixed-n one (one bound, all thresholds). The same argument with the fixed-n PREDICT test
(P(returns a class other than the smoothed one) <= alpha_k at look k, Cohen et al. 2019) gives the
sequential PREDICT.

Levels. alpha_K (the cap's share) is ``final_share`` of alpha, the rest split evenly over the earlier looks.
With ``match_fixed`` (default) and the decision thresholds known before the estimation samples (CERTIFY),
the cap's share is raised where needed so that every threshold fixed-n Clopper-Pearson at alpha certifies
from a count c is certified at the cap from the same count (``matched_share``): run to the cap, the rule is
never less powerful than the fixed one. Without it a threshold just below the fixed rule's best bound
(alpha^(1/n) at n/n, e.g. SPT's p_A thresholds near 0.985 at n = 500) could never be certified at alpha/2.
The schedule depends on the thresholds only, never on the samples, so the argument above is unchanged.

Stopping (affects the number of samples and the power, never the validity above): after look k a
threshold tau is *decided* when it is certified (L*_k > tau), or when it is *futile*: the one-sided
Clopper-Pearson upper bound at level beta_k (betas split like the alphas, beta = alpha by default) is
below tau, or it is *unreachable*: even if every remaining sample were a success, no later look's bound
would exceed tau. Sampling stops at the first look where every threshold (and 1/2, the abstain threshold)
is decided, or at the cap. A threshold given up as futile while its true p exceeds it costs power with
probability <= beta; certification stays valid at alpha whatever beta is.

Everything a decision depends on is integers: per look k and threshold tau the smallest count that
certifies (``critical_counts``), the largest count that is futile and the smallest count from which tau is
still reachable. The certificate records the settings, the looks, the thresholds and the count at every
look done, and ``recompute`` reproduces the bound and the stopping look from them. A PREDICT record keeps
the top-two counts at every look done and its label; ``recompute_predict`` replays it.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import bdtrik, betainc, betaincinv
from scipy.stats import binom

from benchmark.errors import BenchError

RULE = "cp-union"
SETTING_KEYS = ("first", "growth", "final_share", "beta", "match_fixed")
#: slack for round-off when checking that recorded levels sum to at most alpha
_SUM_RTOL = 1e-12


@dataclass(frozen=True)
class SequentialSettings:
    """Parameters of the ``cp-union`` rule (the cap n and alpha come from the protocol).

    Attributes:
        first: sample size of the first look.
        growth: ratio between consecutive looks (t_{k+1} = ceil(first * growth^k), the last is the cap).
        final_share: share of alpha spent at the cap; the rest is split evenly over the earlier looks
            (keeps the power at the cap close to fixed-n Clopper-Pearson at alpha).
        beta: futility level (power only); None = alpha.
        match_fixed: when the thresholds are known (CERTIFY), raise the cap's share above ``final_share``
            where needed so that at the cap every threshold is certified from the same count as by fixed-n
            Clopper-Pearson at alpha (``matched_share``): the rule is then never less powerful than the
            fixed rule when it runs to the cap. Validity does not depend on it (the levels still sum to
            alpha); it trades early-look power for power at the cap.
    """

    first: int = 16
    growth: float = 2.0
    final_share: float = 0.5
    beta: float | None = None
    match_fixed: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.first, bool) or not isinstance(self.first, int) or self.first < 1:
            raise BenchError(f"sequential.first must be a positive integer, got {self.first!r}.")
        if not self.growth > 1:
            raise BenchError(f"sequential.growth must be > 1, got {self.growth!r}.")
        if not 0 < self.final_share < 1:
            raise BenchError(f"sequential.final_share must be in (0, 1), got {self.final_share!r}.")
        if self.beta is not None and not 0 < self.beta < 1:
            raise BenchError(f"sequential.beta must be in (0, 1) or null, got {self.beta!r}.")
        if not isinstance(self.match_fixed, bool):
            raise BenchError(f"sequential.match_fixed must be true or false, got {self.match_fixed!r}.")

    @classmethod
    def from_dict(cls, d: dict | None) -> "SequentialSettings":
        d = dict(d or {})
        unknown = set(d) - set(SETTING_KEYS)
        if unknown:
            raise BenchError(f"profile sequential: unknown key(s) {sorted(unknown)}; valid: "
                             f"{', '.join(SETTING_KEYS)}.")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Schedule:
    """Looks (cumulative sample sizes) and the alpha / beta spent at each."""

    looks: tuple[int, ...]
    alphas: tuple[float, ...]
    betas: tuple[float, ...]


def critical_count(n: int, alpha: float, tau: float | np.ndarray) -> np.ndarray:
    """Smallest S in [0, n] with CP_lower(S, n, alpha) > tau (n + 1 when none), elementwise in ``tau``: the
    count from which fixed-n Clopper-Pearson certifies tau."""
    tau = np.asarray(tau, dtype=np.float64)
    t = np.full(tau.shape, int(n), dtype=np.int64)
    return _first_true(lambda s: _cp_lower(s, t, alpha) > tau, t, _critical_guess(t, alpha, tau))


def _critical_guess(t: np.ndarray, alpha, tau: np.ndarray) -> np.ndarray:
    """A guess of the smallest S with CP_lower(S, t, alpha) > tau, for ``_first_true`` to check.

    CP_lower(S, t, alpha) > tau iff P(Bin(t, tau) >= S) < alpha, i.e. bdtr(S - 1, t, tau) > 1 - alpha;
    ``bdtrik`` solves bdtr(k, t, tau) = 1 - alpha for a real k, and S = floor(k) + 2 was the answer for
    every threshold tried (t from 32 to 100,000). Only a guess: ``_first_true`` keeps it where the predicate
    itself confirms it and bisects elsewhere, so the result is bisection's. Why: reading a leaderboard
    entry rebuilds every sequential record's schedule, about 100,000 distinct ones for the committed
    entries, and this replaces bisection's ~17 Beta quantiles per threshold by two."""
    with np.errstate(all="ignore"):
        k = bdtrik(1 - np.asarray(alpha, dtype=np.float64), t, tau)
    return np.where(np.isfinite(k), np.floor(k) + 2, t + 1).astype(np.int64)


def _futile_guess(t: np.ndarray, beta, tau: np.ndarray) -> np.ndarray:
    """A guess of the smallest S with CP_upper(S, t, beta) >= tau, for ``_first_true`` to check.

    CP_upper(S, t, beta) >= tau iff P(Bin(t, tau) <= S) >= beta, i.e. bdtr(S, t, tau) >= beta, and bdtr
    grows with S, so S = ceil(k) for the real k with bdtr(k, t, tau) = beta (``bdtrik``). Only a guess, as
    in ``_critical_guess``: the result is bisection's. Why: replaying an entry (``bench verify-entry``) builds
    a decision table per sequential record, and bisecting this column was half of that time."""
    with np.errstate(all="ignore"):
        k = bdtrik(np.asarray(beta, dtype=np.float64), t, tau)
    return np.where(np.isfinite(k), np.ceil(k), t + 1).astype(np.int64)


@functools.lru_cache(maxsize=512)
def matched_share(cap: int, alpha: float, thresholds: tuple[float, ...]) -> float:
    """The smallest share of alpha at the cap with which every threshold that fixed-n Clopper-Pearson (n = cap,
    level alpha) can certify is certified from the same count: for tau with fixed critical count c,
    CP_lower(c, cap, a) > tau iff a > I_tau(c, cap - c + 1) (the Beta CDF at tau), so the share must exceed
    that level / alpha (times 1 + 1e-6 against round-off; at most 1 - 1e-9 so the early looks keep a level).
    Cached: CERTIFY asks for the same thresholds again and again (every example of a task)."""
    taus = np.asarray(thresholds, dtype=np.float64)
    c = critical_count(cap, alpha, taus)
    ok = c <= cap
    need = betainc(c[ok], cap - c[ok] + 1, taus[ok]) / alpha * (1 + 1e-6)
    return float(min(need.max(initial=0.0), 1 - 1e-9))


def schedule(settings: SequentialSettings, cap: int, alpha: float,
             thresholds: Sequence[float] | None = None) -> Schedule:
    """The looks first, ceil(first*growth), ... up to the cap, and their levels (sum <= alpha). With the
    decision ``thresholds`` (fixed before any estimation sample) and ``settings.match_fixed``, the cap's share
    is ``max(final_share, matched_share(...))``; without them (PREDICT) it is ``final_share``."""
    _check_cap_alpha(cap, alpha)
    matched = (matched_share(cap, alpha, tuple(float(t) for t in thresholds))
               if thresholds is not None and settings.match_fixed else None)
    return _looks_and_levels(settings, cap, alpha, _cap_share(settings, matched))


def _cap_share(settings: SequentialSettings, matched: float | None) -> float:
    """The cap's share of alpha: ``final_share``, raised to the matched share where there is one."""
    return settings.final_share if matched is None else max(settings.final_share, matched)


def _check_cap_alpha(cap: int, alpha: float) -> None:
    """``schedule``'s domain: a cap of at least one sample and a level strictly between 0 and 1."""
    if cap < 1 or not 0 < alpha < 1:
        raise BenchError(f"need cap >= 1 and alpha in (0,1), got cap={cap}, alpha={alpha}.")


@functools.lru_cache(maxsize=1024)
def _looks_and_levels(settings: SequentialSettings, cap: int, alpha: float, final: float) -> Schedule:
    """``schedule``'s looks and levels once the cap's share ``final`` is known."""
    looks, x = [], float(settings.first)
    while True:
        t = min(cap, math.ceil(x))
        if not looks or t > looks[-1]:
            looks.append(t)
        if t >= cap:
            break
        x *= settings.growth
    beta = settings.beta if settings.beta is not None else alpha

    def split(level: float) -> tuple[float, ...]:
        if len(looks) == 1:
            return (level,)
        early = level * (1 - final) / (len(looks) - 1)
        return (early,) * (len(looks) - 1) + (level * final,)

    return Schedule(tuple(looks), split(alpha), split(beta))


def matched_shares(keys: Sequence[tuple[int, float, tuple[float, ...]]]) -> list[float]:
    """``matched_share(cap, alpha, thresholds)`` for every key, the same numbers from a few vectorised calls
    over all the keys' thresholds at once (every step is elementwise, and each key's maximum is over its own
    thresholds). Why: reading a leaderboard rows file rebuilds every sequential record's schedule, most with
    thresholds of their own, and a few scipy calls per record were about half of ``bench leaderboard``'s time."""
    sizes = np.array([len(th) for _, _, th in keys], dtype=np.int64)
    taus = np.array([t for _, _, th in keys for t in th], dtype=np.float64)
    caps = np.repeat(np.array([int(c) for c, _, _ in keys], dtype=np.int64), sizes)
    alphas = np.repeat(np.array([float(a) for _, a, _ in keys], dtype=np.float64), sizes)
    c = _first_true(lambda s: _cp_lower(s, caps, alphas) > taus, caps, _critical_guess(caps, alphas, taus))
    ok = c <= caps
    need = np.zeros(len(taus))
    need[ok] = betainc(c[ok], caps[ok] - c[ok] + 1, taus[ok]) / alphas[ok] * (1 + 1e-6)
    top = np.zeros(len(keys))  # a key without thresholds: max(initial=0.0)
    if len(taus):
        filled = sizes > 0
        top[filled] = np.maximum(np.maximum.reduceat(need, (np.cumsum(sizes) - sizes)[filled]), 0.0)
    return [float(min(v, 1 - 1e-9)) for v in top]


# ------------------------------------------------------------------ integer decision tables
def _cp_lower(s: np.ndarray, t: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Vectorised one-sided Clopper-Pearson lower bound: stats.lower_confidence_bound's Beta quantile
    (``betaincinv`` is the function ``scipy.stats.beta.ppf`` evaluates, without its per-call overhead;
    tests check they agree)."""
    s, t, a = np.broadcast_arrays(np.asarray(s, dtype=np.float64), np.asarray(t, dtype=np.float64),
                                  np.asarray(a, dtype=np.float64))
    out = np.zeros(s.shape)
    pos = s > 0
    out[pos] = betaincinv(s[pos], t[pos] - s[pos] + 1, a[pos])
    return out


def _cp_upper(s: np.ndarray, t: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Vectorised one-sided Clopper-Pearson upper bound (1 when s == t), as stats.upper_confidence_bound."""
    s, t, a = np.broadcast_arrays(np.asarray(s, dtype=np.float64), np.asarray(t, dtype=np.float64),
                                  np.asarray(a, dtype=np.float64))
    out = np.ones(s.shape)
    lt = s < t
    out[lt] = betaincinv(s[lt] + 1, t[lt] - s[lt], 1 - a[lt])
    return out


def _first_true(pred: Callable[[np.ndarray], np.ndarray], t: np.ndarray,
                guess: np.ndarray | None = None) -> np.ndarray:
    """Smallest s in [0, t] with pred(s) true for a predicate monotone in s (t + 1 if none), elementwise.

    ``guess``: candidate answers; each one that the predicate confirms (true at it, false just below it) is
    taken, the others are bisected. For a monotone predicate the answer is unique, so it is the same with
    or without a guess; a good guess costs two evaluations instead of log2(t) + 1."""
    lo, hi = np.zeros(t.shape, dtype=np.int64), t.astype(np.int64) + 1  # answer in [lo, hi]
    if guess is not None:
        g = np.clip(np.asarray(guess, dtype=np.int64), lo, hi)
        holds = (g > t) | pred(np.minimum(g, t))  # t + 1 ("none") needs only the check below it
        below = (g > 0) & pred(np.clip(g - 1, 0, t))
        known = holds & ~below
        lo, hi = np.where(known, g, lo), np.where(known, g, hi)
    while np.any(lo < hi):
        active = lo < hi
        mid = (lo + hi) // 2
        ok = pred(np.minimum(mid, t)) & (mid <= t)
        hi, lo = np.where(active & ok, mid, hi), np.where(active & ~ok, mid + 1, lo)
    return lo


@dataclass(frozen=True)
class Tables:
    """Per look k (rows) and threshold (columns): the counts that decide.

    certify[k, j]: smallest S_k with L_k > tau_j; futile[k, j]: largest S_k with U_k < tau_j (-1 if none);
    reach[k, j]: smallest S_k from which some look m >= k can still certify tau_j when every remaining
    sample succeeds (S_k < reach = unreachable).
    """

    schedule: Schedule
    thresholds: np.ndarray
    certify: np.ndarray
    futile: np.ndarray
    reach: np.ndarray


def decision_tables(sched: Schedule, thresholds: Sequence[float]) -> Tables:
    """The integer tables of ``sched`` for ``thresholds`` (1/2 is always added: the abstain decision)."""
    return _tables(sched, tuple(float(x) for x in thresholds))


#: tables built ahead in one batch by ``prime_tables`` for the replays that follow; ``_tables`` takes them out
_PRIMED: dict[tuple[Schedule, tuple[float, ...]], Tables] = {}


@functools.lru_cache(maxsize=512)
def _tables(sched: Schedule, thresholds: tuple[float, ...]) -> Tables:
    if any(math.isnan(x) for x in thresholds):
        raise BenchError(f"decision thresholds must be numbers, got {thresholds}.")
    primed = _PRIMED.pop((sched, thresholds), None)
    return primed if primed is not None else _tables_batch([(sched, thresholds)])[0]


def _tables_batch(items: Sequence[tuple[Schedule, tuple[float, ...]]]) -> list[Tables]:
    """The tables of every (schedule, thresholds) item, from one vectorised pass over all their (look, threshold)
    cells: every step but the last is elementwise, and the last (``reach``) runs per item, so each item's tables
    are the ones it would get alone."""
    taus = [np.unique(np.asarray([0.5, *thresholds], dtype=np.float64)) for _, thresholds in items]
    sizes = [len(sched.looks) * len(tz) for (sched, _), tz in zip(items, taus)]

    def per_cell(field: str, dtype: type) -> np.ndarray:
        """Each item's per-look ``field``, repeated over its thresholds (its [looks, thresholds] grid, flat)."""
        return np.concatenate([np.repeat(np.asarray(getattr(sched, field), dtype=dtype), len(tz))
                               for (sched, _), tz in zip(items, taus)])

    t, a, b = per_cell("looks", np.int64), per_cell("alphas", np.float64), per_cell("betas", np.float64)
    tau = np.concatenate([np.tile(tz, len(sched.looks)) for (sched, _), tz in zip(items, taus)])
    cert = _first_true(lambda s: _cp_lower(s, t, a) > tau, t, _critical_guess(t, a, tau))
    futile = _first_true(lambda s: _cp_upper(s, t, b) >= tau, t, _futile_guess(t, b, tau)) - 1
    out, start = [], 0
    for (sched, _), tz, size in zip(items, taus, sizes):
        shape = (len(sched.looks), len(tz))
        tk, ck, fk = (x[start:start + size].reshape(shape).copy() for x in (t, cert, futile))
        start += size
        gap = ck - tk  # a certifying count at look m, minus t_m: S_k >= min_{m>=k} (cert_m - (t_m - t_k))
        reach = np.minimum.accumulate(gap[::-1], axis=0)[::-1] + tk
        for arr in (tz, ck, fk, reach):
            arr.flags.writeable = False  # shared through the cache
        out.append(Tables(sched, tz, ck, fk, reach))
    return out


def prime_tables(records: Sequence[dict]) -> None:
    """Build the decision tables of these CERTIFY estimate records in one batch, for the ``recompute`` calls that
    follow (records that ``recompute`` would reject are left to it). Why: replaying a TSS certificate replays a
    record per slice endpoint, and building each one's tables alone was most of ``bench verify-entry``'s time."""
    _PRIMED.clear()
    items: dict[tuple[Schedule, tuple[float, ...]], None] = {}
    for record in records:
        try:
            key = (record_schedule(record), tuple(float(x) for x in record["thresholds"]))
        except (KeyError, TypeError, ValueError, BenchError):
            continue
        if not any(math.isnan(x) for x in key[1]):
            items[key] = None
    if items:
        _PRIMED.update(zip(items, _tables_batch(list(items))))


def rule_state(counts: np.ndarray, tables: Tables) -> tuple[np.ndarray, np.ndarray]:
    """The rule on counts ``[..., K']`` at the first K' looks (vectorised over ``...``).

    Returns (certified ``[..., K', J]``: L*_k > tau_j, decided ``[..., K']``: every threshold is certified,
    futile or unreachable at look k).
    """
    counts = np.asarray(counts, dtype=np.int64)
    k = counts.shape[-1]
    s = counts[..., :, None]
    cert = np.logical_or.accumulate(s >= tables.certify[:k], axis=-2)
    decided = (cert | (s <= tables.futile[:k]) | (s < tables.reach[:k])).all(-1)
    return cert, decided


def run_rule(counts: np.ndarray, tables: Tables) -> tuple[np.ndarray, np.ndarray]:
    """Where the rule stops on counts ``[..., K]`` at every look, and what it certifies there.

    Returns (stop, certified): the index of the first decided look (the last look if none) and whether
    each threshold is certified there ``[..., J]``.
    """
    cert, done = rule_state(counts, tables)
    done[..., -1] = True
    stop = done.argmax(-1)
    return stop, np.take_along_axis(cert, stop[..., None, None], axis=-2)[..., 0, :]


def lower_bound(counts: Sequence[int], sched: Schedule) -> float:
    """L* = max over the looks done of the Clopper-Pearson bound at that look's level."""
    k = len(counts)
    if k == 0:
        return 0.0
    return float(_cp_lower(np.asarray(counts), np.asarray(sched.looks[:k]), np.asarray(sched.alphas[:k])).max())


# ------------------------------------------------------------------ CERTIFY's estimation step
@dataclass
class SequentialEstimate:
    """Outcome of the sequential estimation of one class's probability."""

    p_lower: float
    counts: np.ndarray  # class counts over all samples used
    counts_a: list[int]  # count of the class at each look done
    record: dict

    @property
    def n(self) -> int:
        return int(self.counts.sum())


def plan(settings: SequentialSettings, cap: int, alpha: float, thresholds: Sequence[float]) -> Tables:
    """The schedule and decision tables of one CERTIFY estimate: thresholds are the caller's plus 1/2 (the
    abstain decision), the set the record stores, so a replay rebuilds the same schedule from the record."""
    taus = sorted({0.5, *(float(x) for x in thresholds)})
    return decision_tables(schedule(settings, cap, alpha, taus), taus)


def _record(settings: SequentialSettings, alpha: float, cap: int, tables: Tables, counts_a: list[int]) -> dict:
    sched = tables.schedule
    return {"rule": RULE, **settings.to_dict(), "alpha": alpha, "cap": cap, "looks": list(sched.looks),
            "alphas": list(sched.alphas), "betas": list(sched.betas),
            "thresholds": [float(x) for x in tables.thresholds], "counts_a": counts_a}


#: a CERTIFY record's ``stopped`` value when ``estimate_many``'s budget ended the stream before the rule did
BUDGET_STOP = "budget"


def estimate(draw: Callable[[int], np.ndarray], index: int, settings: SequentialSettings, cap: int,
             alpha: float, thresholds: Sequence[float]) -> SequentialEstimate:
    """Draw fresh samples look by look (``draw(k)`` = class counts of k new samples) until the rule stops."""
    return estimate_many(lambda ks: np.asarray(draw(ks[0]))[None], index, settings, cap, alpha, [thresholds])[0]


def estimate_many(draw: Callable[[list[int]], np.ndarray], index: int, settings: SequentialSettings, cap: int,
                  alpha: float, thresholds: Sequence[Sequence[float]],
                  budget: int | None = None) -> list[SequentialEstimate]:
    """``estimate`` for several independent streams in lockstep (TSS slice endpoints): at each look one call
    ``draw(ks)`` draws ``ks[i]`` new samples of every stream (0 for a stream that has stopped) and returns
    their class counts ``[len(ks), C]``, so a caller can evaluate all of them in one batch.

    Each stream follows exactly the rule of ``estimate`` on its own samples (its own thresholds, same
    schedule, same record), so its validity is that of ``estimate``: running streams side by side changes
    which samples are drawn together, never what any one stream decides from its own.

    ``budget`` (a caller's cost control, GSmooth's ``max_draws``): once the draws of all streams together reach
    it, no further look is drawn, and a stream the rule has not stopped yet ends undecided, its record marked
    ``stopped: "budget"``. Its lower bound at that look is the rule's bound, valid at any look (the union over
    looks of levels summing to alpha), so ending a stream early is sound; a stream with one threshold (a slice
    endpoint) that the rule has not stopped has not passed it, so it fails. Until the budget is reached the
    draws are those of no budget, so a run that never reaches it is unchanged."""
    tables = [plan(settings, cap, alpha, th) for th in thresholds]
    looks = tables[0].schedule.looks if tables else ()  # the same for every stream (levels may differ)
    m = len(tables)
    counts: np.ndarray | None = None
    counts_a: list[list[int]] = [[] for _ in range(m)]
    running, prev, drawn = np.ones(m, dtype=bool), 0, 0
    for t in looks:
        ks = [t - prev if r else 0 for r in running]
        c = np.asarray(draw(ks), dtype=np.int64)
        counts, prev, drawn = c if counts is None else counts + c, t, drawn + sum(ks)
        for i in np.flatnonzero(running):
            counts_a[i].append(int(counts[i, index]))
            if rule_state(np.asarray(counts_a[i]), tables[i])[1][-1]:
                running[i] = False
        if not running.any() or (budget is not None and drawn >= budget):
            break
    out = []
    for i in range(m):
        record = _record(settings, alpha, cap, tables[i], counts_a[i])
        if running[i] and len(counts_a[i]) < len(looks):  # cut by the budget, not stopped by the rule or the cap
            record["stopped"] = BUDGET_STOP
        out.append(SequentialEstimate(lower_bound(counts_a[i], tables[i].schedule), counts[i], counts_a[i], record))
    return out


@functools.lru_cache(maxsize=1024)
def _cached_schedule(settings: SequentialSettings, cap: int, alpha: float, thresholds: tuple[float, ...]) -> Schedule:
    return schedule(settings, cap, alpha, thresholds)


def _record_key(record: dict) -> tuple[SequentialSettings, int, float, tuple[float, ...]]:
    """(settings, cap, alpha, thresholds) of a CERTIFY estimate record (KeyError, TypeError, ValueError or
    BenchError when they are missing or invalid)."""
    # records written before match_fixed existed were scheduled without matching
    settings = SequentialSettings(**{k: record[k] for k in SETTING_KEYS[:4]},
                                  match_fixed=record.get("match_fixed", False))
    return settings, int(record["cap"]), float(record["alpha"]), tuple(float(x) for x in record["thresholds"])


def record_schedule(record: dict) -> Schedule:
    """The schedule a CERTIFY estimate record's settings, cap, alpha and thresholds give (KeyError, TypeError,
    ValueError or BenchError when they are missing or invalid). Cached: a TSS certificate holds one record
    per slice endpoint, all with the same schedule."""
    return _cached_schedule(*_record_key(record))


#: the fields of a CERTIFY estimate record that its settings, cap, alpha and thresholds determine:
#: ``recompute`` reports a record whose fields differ from that schedule, so storage may leave them out
DERIVED_KEYS = ("looks", "alphas", "betas")


def is_estimate_record(obj: object) -> bool:
    """Whether ``obj`` is a CERTIFY estimate record of this rule (``_record``'s shape)."""
    return isinstance(obj, dict) and obj.get("rule") == RULE and "counts_a" in obj


def compact_record(record: dict) -> dict:
    """``record`` without ``DERIVED_KEYS`` where they are exactly its schedule's (a lossless encoding for
    storage: ``expand_record`` restores them); any other record (invalid, foreign) is returned unchanged,
    so whatever ``recompute`` would report about it is still there to report. Why: a TSS certificate holds
    one record per slice endpoint (up to 101), and these lists were three fifths of a leaderboard rows file."""
    try:
        sched = record_schedule(record)
    except (KeyError, TypeError, ValueError, BenchError):
        return record
    for key in DERIVED_KEYS:
        if key not in record or [float(v) for v in record[key]] != [float(v) for v in getattr(sched, key)]:
            return record
    return {k: v for k, v in record.items() if k not in DERIVED_KEYS}


def expand_record(record: dict) -> dict:
    """The inverse of ``compact_record``: the missing ``DERIVED_KEYS`` filled in from the record's schedule,
    with the types ``_record`` writes; a record that has them all, or whose schedule cannot be built, is
    returned unchanged."""
    if all(key in record for key in DERIVED_KEYS):
        return record
    try:
        sched = record_schedule(record)
    except (KeyError, TypeError, ValueError, BenchError):
        return record
    return {**record, **{key: list(getattr(sched, key)) for key in DERIVED_KEYS if key not in record}}


def expand_records(records: Sequence[dict]) -> None:
    """``expand_record`` on every record, in place (the missing keys added in the order it adds them), with
    the schedules of all the records built together (``matched_shares``): the rows of a leaderboard entry
    hold tens of thousands of records."""
    todo: list[tuple[dict, tuple]] = []
    keys: dict[tuple, None] = {}
    for record in records:
        if all(key in record for key in DERIVED_KEYS):
            continue
        try:
            key = _record_key(record)
            _check_cap_alpha(key[1], key[2])
        except (KeyError, TypeError, ValueError, BenchError):
            continue
        todo.append((record, key))
        keys[key] = None
    matched = [key for key in keys if key[0].match_fixed]
    shares = dict(zip(matched, matched_shares([key[1:] for key in matched])))
    scheds = {key: _looks_and_levels(*key[:3], _cap_share(key[0], shares.get(key))) for key in keys}
    for record, key in todo:
        for name in DERIVED_KEYS:
            if name not in record:
                record[name] = list(getattr(scheds[key], name))


def recompute(record: dict, alpha: float | None = None) -> tuple[float, list[str]]:
    """(L*, problems) from a recorded ``cp-union`` estimate: the schedule must follow from the recorded
    settings (levels summing to <= alpha), the counts must be possible, and the rule must stop exactly
    at the last recorded look, or, in a record marked ``stopped: "budget"`` (``estimate_many``), at no look
    recorded and before the cap: such a stream ended undecided, and its bound has passed no threshold."""
    problems: list[str] = []
    if record.get("rule") != RULE:
        return 0.0, [f"unknown sequential rule {record.get('rule')!r} (known: {RULE})."]
    try:
        counts = [int(c) for c in record["counts_a"]]
        thresholds = [float(x) for x in record["thresholds"]]
        sched = record_schedule(record)
    except (KeyError, TypeError, ValueError, BenchError) as exc:
        return 0.0, [f"sequential record incomplete or invalid: {exc}"]
    if alpha is not None and float(record["alpha"]) != float(alpha):
        problems.append(f"sequential alpha {record['alpha']} differs from the certificate's alpha {alpha}.")
    for key in ("looks", "alphas", "betas"):
        if [float(v) for v in record.get(key, [])] != [float(v) for v in getattr(sched, key)]:
            problems.append(f"recorded {key} {record.get(key)} differ from the schedule {list(getattr(sched, key))} "
                            "of the recorded settings.")
    if sum(sched.alphas) > float(record["alpha"]) * (1 + _SUM_RTOL):
        problems.append(f"levels sum to {sum(sched.alphas)} > alpha {record['alpha']}.")
    if not 1 <= len(counts) <= len(sched.looks):
        return 0.0, problems + [f"{len(counts)} looks recorded, the schedule has {len(sched.looks)}."]
    prev_s, prev_t = 0, 0
    for s, t in zip(counts, sched.looks):
        if not prev_s <= s <= prev_s + (t - prev_t):
            return 0.0, problems + [f"count {s} at look {t} is impossible after {prev_s} at look {prev_t}."]
        prev_s, prev_t = s, t
    _, done = rule_state(np.asarray(counts), decision_tables(sched, thresholds))
    if record.get("stopped") is not None:
        if record["stopped"] != BUDGET_STOP or done.any() or len(counts) == len(sched.looks):
            problems.append(f"the record says stopped {record['stopped']!r} at look {sched.looks[len(counts) - 1]}, "
                            f"but only a stream the rule has not stopped before its cap can end on a budget.")
    elif done[:-1].any() or not (done[-1] or len(counts) == len(sched.looks)):
        where = sched.looks[int(done.argmax())] if done.any() else "a later look"
        problems.append(f"the rule stops at {where}, the record at look {sched.looks[len(counts) - 1]}.")
    return lower_bound(counts, sched), problems


def centre_out_order(n: int) -> list[int]:
    """Indices 0..n-1 (n odd) in the fixed order centre, centre+1, centre-1, centre+2, ... (fixed-sequence
    testing of slice endpoints, baselines/tss/slicing.py)."""
    centre = (n - 1) // 2
    return [centre] + [centre + s * k for k in range(1, centre + 1) for s in (1, -1)]


# ------------------------------------------------------------------ PREDICT
def predict_pvalue(n_a: np.ndarray, n_b: np.ndarray) -> np.ndarray:
    """Two-sided binomial test of n_a out of n_a + n_b at p = 1/2, vectorised.

    For p = 1/2 the distribution is symmetric, so the p-value is min(1, 2 P(X >= max(n_a, n_b))); this is
    what ``scipy.stats.binomtest(...).pvalue`` returns (tested), 1 when n_a == n_b.
    """
    n_a, n_b = np.broadcast_arrays(np.asarray(n_a, dtype=np.int64), np.asarray(n_b, dtype=np.int64))
    m, top = n_a + n_b, np.maximum(n_a, n_b)
    # binom._sf is what binom.sf evaluates inside its support (0 <= top - 1 < m here, m > 0), without its
    # per-call argument handling (~35x the cost on PREDICT's few counts; tests/certify/test_sequential.py)
    sf = np.where(top >= 1, binom._sf(np.maximum(top - 1, 0), np.maximum(m, 1), 0.5), 1.0)
    p = np.minimum(1.0, 2 * sf)
    return np.where((m == 0) | (2 * top == m), 1.0, p)


def predict_look(n_a: np.ndarray, n_b: np.ndarray, k: int, sched: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """(accept, hopeless) at look k for leader / runner-up counts: accept = the test at alpha_k rejects;
    hopeless = no later look can accept even if every remaining sample goes to the leader (the best case
    for any class: the p-value grows with the runner-up count and falls with the leader's)."""
    n_a, n_b = np.asarray(n_a), np.asarray(n_b)
    accept = (n_a > n_b) & (predict_pvalue(n_a, n_b) <= sched.alphas[k])
    # every later look m at once (a last axis): each test is elementwise, as one call per look was
    extra = np.asarray(sched.looks[k + 1:], dtype=np.int64) - sched.looks[k]
    later = predict_pvalue(n_a[..., None] + extra, n_b[..., None]) <= np.asarray(sched.alphas[k + 1:])
    return accept, ~later.any(axis=-1)


def predict(draw: Callable[[int], np.ndarray], settings: SequentialSettings, cap: int,
            alpha: float) -> tuple[int | None, np.ndarray, dict]:
    """Sequential PREDICT: (label or None for abstain, class counts, record)."""
    return predict_many(lambda streams, k: np.asarray(draw(k))[None], settings, cap, alpha, 1)[0]


def predict_many(draw: Callable[[list[int], int], np.ndarray], settings: SequentialSettings, cap: int,
                 alpha: float, m: int) -> list[tuple[int | None, np.ndarray, dict]]:
    """``m`` sequential PREDICTs side by side: at each look ``draw(streams, k)`` returns the class counts
    ``[len(streams), C]`` of k fresh samples for each stream still running (one batch for all of them);
    a stream stops at its own first accepting or hopeless look, exactly as ``predict`` alone would."""
    sched = schedule(settings, cap, alpha)
    counts: list[np.ndarray | None] = [None] * m
    labels: list[int | None] = [None] * m
    used, top2 = [0] * m, [[] for _ in range(m)]
    active, prev = list(range(m)), 0
    for k, t in enumerate(sched.looks):
        if not active:
            break
        new = np.asarray(draw(active, t - prev), dtype=np.int64)
        still = []
        for row, i in enumerate(active):
            counts[i] = new[row] if counts[i] is None else counts[i] + new[row]
            used[i] = t
            order = np.argsort(-counts[i], kind="stable")
            n_a, n_b = int(counts[i][order[0]]), int(counts[i][order[1]]) if len(counts[i]) > 1 else 0
            top2[i].append([n_a, n_b])
            accept, hopeless = predict_look(np.int64(n_a), np.int64(n_b), k, sched)
            if accept:
                labels[i] = int(order[0])
            elif not hopeless:
                still.append(i)
        active, prev = still, t
    return [(labels[i], counts[i], {"rule": RULE, "n": int(used[i]), "top2": top2[i],
                                    "label": -1 if labels[i] is None else labels[i]}) for i in range(m)]


def recompute_predict(record: dict, settings: SequentialSettings, cap: int,
                      alpha: float) -> tuple[int | None, list[str]]:
    """(label or None for abstain, problems) replayed from a sequential PREDICT record under the protocol's
    settings, cap and alpha: top-two counts per look that samples can produce, the test at every look, a
    stop exactly at the last recorded look, and the recorded label (-1 = abstain) the one the test gives."""
    if not isinstance(record, dict) or record.get("rule") != RULE:
        return None, [f"unknown or missing sequential PREDICT record {record!r:.120}."]
    sched = schedule(settings, cap, alpha)
    try:
        top2 = [(int(a), int(b)) for a, b in record["top2"]]
        label, n = int(record["label"]), int(record["n"])
    except (KeyError, TypeError, ValueError) as exc:
        return None, [f"sequential PREDICT record incomplete or invalid: {exc!r}"]
    if not 1 <= len(top2) <= len(sched.looks):
        return None, [f"{len(top2)} PREDICT looks recorded, the schedule has {len(sched.looks)}."]
    if n != sched.looks[len(top2) - 1]:
        return None, [f"PREDICT n = {n} is not the last look recorded ({sched.looks[len(top2) - 1]})."]
    prev, prev_t = (0, 0), 0
    for (a, b), t in zip(top2, sched.looks):
        # the top count and the top-two sum grow by at most the new samples; neither ever falls
        grow = t - prev_t
        if not (0 <= b <= a and a + b <= t and prev[0] <= a <= prev[0] + grow and b >= prev[1]
                and a + b <= prev[0] + prev[1] + grow):
            return None, [f"top-two counts {[a, b]} at look {t} are impossible after {list(prev)} at look {prev_t}."]
        prev, prev_t = (a, b), t
    decided = None
    for k, (a, b) in enumerate(top2):
        accept, hopeless = predict_look(np.int64(a), np.int64(b), k, sched)
        if accept or hopeless:
            decided = (k, bool(accept))
            break
    last = len(top2) - 1
    if decided is None and last < len(sched.looks) - 1:
        return None, [f"the PREDICT test stops at a later look, the record at look {sched.looks[last]}."]
    if decided is not None and decided[0] != last:
        return None, [f"the PREDICT test stops at look {sched.looks[decided[0]]}, the record at {sched.looks[last]}."]
    accepted = decided is not None and decided[1]
    if accepted != (label != -1) or label < -1:
        return None, [f"recorded PREDICT label {label} but the test {'accepts' if accepted else 'abstains'} "
                      f"on the counts {list(top2[-1])}."]
    return (label if accepted else None), []
