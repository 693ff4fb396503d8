"""The JSON schema of a leaderboard entry (built by ``benchmark.leaderboard.entry``), validated with ``jsonschema``.

Numbers are typed as numbers (RobustBench stores accuracies as strings; we do not). Accuracies are
fractions in [0, 1]; ``null`` means "not applicable" (e.g. no certificate), never "missing".
"""
from __future__ import annotations

from typing import Any

from benchmark.errors import BenchError

SCHEMA_VERSION = 1

_fraction = {"type": "number", "minimum": 0, "maximum": 1}
_fraction_or_null = {"anyOf": [_fraction, {"type": "null"}]}
_sha = {"type": "string", "pattern": "^[0-9a-f]{64}$"}

RESULT = {
    "type": "object",
    "required": ["transformation", "label", "budget", "clean_accuracy", "certified_accuracy",
                 "empirical_accuracy", "abstain_rate", "n_examples"],
    "additionalProperties": False,
    "properties": {
        "transformation": {"type": "string"},
        "label": {"type": "string"},
        "budget": {"type": "number", "minimum": 0},
        "clean_accuracy": _fraction,
        "certified_accuracy": _fraction_or_null,
        "empirical_accuracy": _fraction_or_null,
        "corruption_accuracy": _fraction_or_null,
        "abstain_rate": _fraction,
        "seconds_per_example": {"type": "number", "minimum": 0},
        "n_examples": {"type": "integer", "minimum": 1},
    },
}

#: one line of the survival table (benchmark/reports/survival.py), without the dataset (the entry's own)
SURVIVAL = {
    "type": "object",
    "required": ["transformation", "label", "budget", "n_examples", "certified", "also_sound", "contradicted",
                 "n_certified", "n_also_sound", "n_contradicted", "grid_points"],
    "additionalProperties": False,
    "properties": {
        "transformation": {"type": "string"},
        "label": {"type": "string"},
        "budget": {"type": "number", "exclusiveMinimum": 0},
        "n_examples": {"type": "integer", "minimum": 1},
        "certified": _fraction,
        "also_sound": _fraction_or_null,
        "contradicted": _fraction_or_null,
        "n_certified": {"type": "integer", "minimum": 0},
        "n_also_sound": {"type": "integer", "minimum": 0},
        "n_contradicted": {"type": "integer", "minimum": 0},
        "grid_points": {"type": ["integer", "null"], "minimum": 0},
    },
}

TASK = {
    "type": "object",
    "required": ["hash", "transformation", "config", "budgets", "supported", "certified", "labels", "examples"],
    "properties": {
        "hash": {"type": "string"},
        "transformation": {"type": "string"},
        "models_transformation": {"type": "string"},
        "config": {"type": "object"},
        "budgets": {"type": "array", "items": {"type": "number"}},
        "supported": {"type": "boolean"},
        "certified": {"type": "boolean"},
        "labels": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "examples": {"type": "array", "items": {"type": "integer"}},
        "models": {"type": "array", "items": {"type": "object", "required": ["key", "sha256"],
                                              "properties": {"key": {"type": "string"}, "sha256": _sha}}},
    },
}

ENTRY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "semantic-robustness-bench leaderboard entry",
    "type": "object",
    "required": ["schema_version", "defense", "suite", "dataset", "protocol", "tasks", "results", "provenance",
                 "flags", "checker"],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "defense": {
            "type": "object",
            "required": ["name", "ref", "labels", "certified", "description", "paper", "code"],
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "ref": {"type": "string"},
                "labels": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "certified": {"type": "boolean"},
                "description": {"type": "string"},
                "paper": {"type": "string"},
                "code": {"type": "string"},
            },
        },
        "suite": {"type": "string"},
        "kind": {"enum": ["semantic", "corruptions"]},
        "dataset": {"type": "string"},
        "protocol": {
            "type": "object",
            "required": ["profile", "n0", "n", "alpha", "n_predict", "n_examples", "examples", "seed", "attack"],
            "properties": {
                "profile": {"type": "string"},
                "n0": {"type": "integer", "minimum": 1},
                "n": {"type": "integer", "minimum": 1},
                "alpha": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                "n_predict": {"type": ["integer", "null"]},
                "n_examples": {"type": "integer", "minimum": 1},
                "examples": {"type": "array", "items": {"type": "integer"}},
                "seed": {"type": "integer"},
                "attack": {},
                "profile_settings": {"type": "object"},
            },
        },
        "tasks": {"type": "array", "items": TASK, "minItems": 1},
        "results": {"type": "array", "items": RESULT},
        # optional: entries of defenses without surrogate-only certificates (and older entries) have none
        "survival": {"type": "array", "items": SURVIVAL},
        "provenance": {
            "type": "object",
            "required": ["package_version", "git_commit", "config_hash", "run_config_hash", "checkpoints",
                         "environment", "created", "rows_file", "rows_sha256"],
            "properties": {
                "package_version": {"type": "string"},
                "git_commit": {"type": ["string", "null"]},
                "config_hash": {"type": "string"},
                "run_config_hash": {"type": "string"},
                "checkpoints": {"type": "object", "additionalProperties": _sha},
                "environment": {"type": "object"},
                "created": {"type": "string"},
                "rows_file": {"type": "string"},
                "rows_sha256": _sha,
            },
        },
        "flags": {
            "type": "object",
            "required": ["invalid", "consistency_violations", "high_abstain", "randomized_without_certificate",
                         "warnings"],
            "properties": {
                "invalid": {"type": "boolean"},
                "consistency_violations": {"type": "integer", "minimum": 0},
                "high_abstain": {"type": "array", "items": {"type": "string"}},
                "randomized_without_certificate": {"type": "boolean"},
                "warnings": {"type": "array", "items": {"type": "string"}},
                "unverified": {"type": "array", "items": {"type": "string"}},
            },
        },
        "checker": {"type": "object"},
    },
}


def validate_entry(entry: Any, where: str = "leaderboard entry") -> None:
    """Raise one BenchError listing every schema violation of ``entry``."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(ENTRY_SCHEMA)
    errors = sorted(validator.iter_errors(entry), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors[:20]]
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        raise BenchError(f"{where} does not match the entry schema (benchmark/leaderboard/schema.py):\n"
                         + "\n".join(lines) + more)
