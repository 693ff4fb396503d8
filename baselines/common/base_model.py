"""The base classifier's suite-settable options that every smoothing defense shares (TSS, GSmooth).

Why one place: the GSmooth paper keeps TSS's MNIST architectures and trains its base classifier on its own
smoothing noise "after TSS" (issue #44), so both defenses take the same keys with the same meaning:

* ``arch``: the network (e.g. ``conv4fc3``, TSS's MNIST ``mnist_43``; stored in float16 where the recipes say so);
* ``normalize``: ``[mean, std]`` of the input layer (TSS's MNIST (0.5, 0.5));
* ``training``: a named recipe of ``benchmark.recipes.TRAINING_RECIPES`` (e.g. ``tss-adam``);
* ``consistency_lambda`` / ``noise_draws``: TSS's consistency regularisation over the defense's own noise.

Unset keys are left out of ``classifier_spec``'s arguments, so the model config and its hash stay the dataset
recipe's and existing checkpoints keep their names.
"""
from __future__ import annotations

#: the keys and their "unset" value, merged into a defense's ``defaults``
BASE_MODEL_DEFAULTS: dict[str, None] = {"arch": None, "normalize": None, "training": None,
                                        "consistency_lambda": None, "noise_draws": None}


def base_model_options(config: dict) -> dict:
    """``classifier_spec``'s keyword options from a defense config: only the keys that are set, typed."""
    opts = {"arch": config.get("arch"), "training": config.get("training"),
            "normalize": None if config.get("normalize") is None else tuple(float(v) for v in config["normalize"]),
            "consistency_lambda": (None if config.get("consistency_lambda") is None
                                   else float(config["consistency_lambda"])),
            "noise_draws": None if config.get("noise_draws") is None else int(config["noise_draws"])}
    return {k: v for k, v in opts.items() if v is not None}
