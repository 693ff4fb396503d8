"""``bench verify-entry``: every field of an entry that its rows and run config determine.

The task hashes already bind the profile settings (n0, n, alpha, n_predict, attack overrides, examples
count), seed, budgets and defense config. What an editor could still change is checked here: the
protocol's summary fields against ``profile_settings`` and the rows (the n0, n and alpha every
certificate used; a sequential certificate's cap for n), the example lists, the attack settings against
the installed suite, the checkpoint hashes against the tasks' models and the packaged zoo, and the flags
the rows determine.
"""
from __future__ import annotations

import math

from benchmark.errors import BenchError
from benchmark.leaderboard.entry import HIGH_ABSTAIN


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
    return a == b


def protocol_problems(entry: dict, rows: list[dict]) -> list[str]:
    """The protocol summary against ``profile_settings``, the tasks and the rows."""
    p, settings = entry["protocol"], entry["protocol"].get("profile_settings") or {}
    out = [f"protocol.{k} = {p.get(k)!r} but the profile the tasks were hashed with has {settings.get(src)!r}."
           for k, src in (("profile", "name"), ("n0", "n0"), ("n", "n"), ("alpha", "alpha"),
                          ("n_predict", "n_predict")) if not _same(p.get(k), settings.get(src))]
    examples = sorted({e for t in entry["tasks"] for e in t["examples"]})
    if p["examples"] != examples:
        out.append(f"protocol.examples {p['examples']} differ from the tasks' examples {examples}.")
    if p["n_examples"] != len(examples):
        out.append(f"protocol.n_examples = {p['n_examples']} but the tasks evaluate {len(examples)} examples.")
    have = sorted({r["example"] for r in rows})
    if have != examples:
        out.append(f"the rows hold examples {have}, the tasks list {examples}.")
    for r in rows:
        for c in r.get("certificates", []):
            s = c.get("stats") or {}
            if isinstance(s.get("sequential"), dict):  # n = the samples used; the protocol's n is the cap
                s = {**s, "n": s["sequential"].get("cap")}
            for k in ("n0", "n", "alpha"):
                if k in s and "endpoints" not in s and not _same(s[k], p[k]):
                    return out + [f"example {r['example']} ({r['transformation']}) was certified with {k} = {s[k]}, "
                                  f"the entry's protocol says {p[k]}."]
    return out + _attack_problems(entry, rows)


def _attack_problems(entry: dict, rows: list[dict]) -> list[str]:
    """Attack names in the rows, and the settings against the installed suite (when it has the entry's tasks)."""
    attack = entry["protocol"].get("attack") or []
    names = {a.get("name") for a in attack} | {a.get("fallback") for a in attack}
    used = {run.get(k) for r in rows for a in r.get("attacks", {}).values() for run in a.get("runs", [])
            for k in ("attack", "fallback")} - {None}
    out = [f"the rows were attacked by {sorted(used - names)}, which protocol.attack does not list."] \
        if used - names else []
    if entry.get("kind") == "corruptions":
        return out  # no attacks
    try:
        from benchmark.suites import load_suite
        from benchmark.suites.loader import Profile

        suite = load_suite(entry["suite"])
        profile = Profile(**entry["protocol"]["profile_settings"])
        hashes = {t.hash for t in suite.tasks(profile, entry["protocol"]["seed"], [entry["dataset"]],
                                              [entry["defense"]["ref"]], [t["transformation"] for t in entry["tasks"]])}
    except (BenchError, KeyError, TypeError):
        return out  # the suite changed since: its attack settings cannot be recomputed here
    if hashes == {t["hash"] for t in entry["tasks"]} and suite.attacks(profile) != attack:
        out.append(f"protocol.attack {attack} differs from the suite's attack settings {suite.attacks(profile)}.")
    return out


def checkpoint_problems(entry: dict) -> list[str]:
    """provenance.checkpoints against the tasks' models and, for models the packaged zoo holds, the zoo."""
    from benchmark.models.store import ModelStore

    models = {m["key"]: m for t in entry["tasks"] for m in t.get("models", [])}
    if not models:
        return []  # entries written before tasks recorded their models
    ck = entry["provenance"]["checkpoints"]
    out = [f"provenance.checkpoints {sorted(ck)} differ from the tasks' models {sorted(models)}."] \
        if set(ck) != set(models) else []
    out += [f"checkpoint {k}: provenance sha256 {ck[k]} differs from the task's {m['sha256']}."
            for k, m in models.items() if k in ck and ck[k] != m["sha256"]]
    zoo = ModelStore(allow_train=False)._zoo_manifest().get("entries", {})
    out += [f"checkpoint {k}: sha256 {m['sha256']} is not the packaged zoo's {zoo[k]['sha256']} for the same "
            "config hash." for k, m in models.items()
            if m.get("source") == "zoo" and k in zoo and zoo[k].get("config_hash") == m.get("config_hash")
            and zoo[k]["sha256"] != m["sha256"]]
    return out


def flag_problems(entry: dict, results: list[dict], unverified: list[str]) -> list[str]:
    """The flags the results and rows determine."""
    flags = entry["flags"]
    high = sorted({f"{r['transformation']}/{r['label']}" for r in results if r["abstain_rate"] > HIGH_ABSTAIN})
    out = [f"flags.high_abstain {flags['high_abstain']} but the rows give {high}."] \
        if sorted(flags["high_abstain"]) != high else []
    if sorted(flags.get("unverified", [])) != unverified:
        out.append(f"flags.unverified {flags.get('unverified', [])} but the rows give {unverified}.")
    return out
