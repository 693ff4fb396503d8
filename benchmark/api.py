"""The face of the harness: the one module that defenses and attacks import.

Everything a defense or an attack may use is here, under one name each; the modules behind it can move
without breaking a defense. ``lint-imports`` holds ``baselines/`` and ``attacks/`` to this module
(pyproject.toml, "Defenses and attacks import only the face").

* **Defense API**: :class:`Defense`, :class:`ClassifierDefense`, :class:`Context`, :class:`Certificate`,
  ``ABSTAIN``, ``SURROGATE_ONLY``, and the verified smoothing mechanisms ``parameter_smoothing``,
  ``pixel_smoothing`` (certificates the harness checks) with their ``*_sampler`` forms for PREDICT.
* **Transformations**: :class:`Transformation`, whose capabilities a defense asks for instead of a name:
  ``kind``, ``composition``, ``integer`` / ``enumerable`` / ``enumerate``, ``period``, ``one_sided``,
  ``low`` / ``high``, ``differentiable``, ``has_pixel_bounds`` / ``pixel_bounds``, ``has_linear_layer`` /
  ``linear_layer``, ``has_parameter_lipschitz`` / ``parameter_lipschitz``, ``pixel_mask`` / ``support_mask``,
  ``pixel_offset``,
  ``defaults_for`` (see docs/adding-a-transformation.md).
* **Statistics and certificate rules**: CERTIFY / PREDICT (``certify``, ``predict``, ``predict_many``,
  ``sample_counts``, ``sample_counts_many``), ``lower_confidence_bound``, the lattice pixel noise that stays
  sound in floating point (``lattice_noise``), its parameter-space counterpart (``parameter_lattice``: grid,
  fair-bit parameter noise, the radius that pays for both), GSmooth's lattice code noise with its rule
  (``code_noise``), and the pure decision rules the
  audit re-applies (``radii``, ``radius_rule``, ``threshold_rule``, ``slice_rule``, ``spt_rule``,
  ``sequential``, ``predict_log``, ``general_radius``).
* **Deterministic verification**: CNN bound propagation (``cnn_layers``, ``margin_layers``, ``margin_bounds``)
  and the outward sub-interval search (``ring_edges``, ``verify_outward``).
* **Models**: ``classifier_spec`` (the suite's recipe), :class:`ModelSpec`, the shared architectures.
* **Sound-bound tools** for defenses that bound a transformation themselves (float32 unit round-off
  ``U32``, FFT and interpolation slacks, coordinate boxes, the exact resampling primitives).
* **Errors**: :class:`BenchError` (one clear message naming the problem and the fix), ``unknown_name``.
* **Helpers**: ``progress_bar``, ``in_cpu_slices``, ``load_robustbench_model`` (the one lazy RobustBench
  adapter), and ``Registry`` / ``Accepts`` (the one lazy registry with did-you-mean errors and
  ``file.py:Name`` plugins, which the attacks' registry uses).
"""
from __future__ import annotations

from benchmark.certify import (code_noise, lattice_noise, parameter_lattice, predict_log, radii, radius_rule,
                               sequential, slice_rule, spt_rule, threshold_rule)
from benchmark.certify.certificate import ABSTAIN, SURROGATE_ONLY, Certificate
from benchmark.certify.general_radius import general_radius
from benchmark.certify.mechanisms import parameter_sampler, parameter_smoothing, pixel_sampler, pixel_smoothing
from benchmark.certify.radii import radius_threshold
from benchmark.certify.sequential import centre_out_order
from benchmark.certify.smoothing import (SmoothingParams, certify, predict, predict_many, sample_counts,
                                         sample_counts_many)
from benchmark.certify.stats import lower_confidence_bound
from benchmark.context import Context
from benchmark.defense import ClassifierDefense, Defense
from benchmark.errors import BenchError, unknown_name
from benchmark.infra.chunks import in_cpu_slices
from benchmark.infra.progress import progress_bar
from benchmark.infra.registry import Accepts, Registry
from benchmark.infra.robustbench import load_robustbench_model
from benchmark.models.architectures import Normalize, SmallCNN
from benchmark.models.store import ModelSpec
from benchmark.recipes import classifier_spec
from benchmark.transformations import get_transformation
from benchmark.transformations.base import Transformation, check_images
from benchmark.transformations.bounds import U32
from benchmark.transformations.bounds.bilinear import bilinear_range_batched
from benchmark.transformations.bounds.fourier import fft_slack
from benchmark.transformations.bounds.geometric import (COORD_SLACK, VALUE_SLACK, rotation_coordinate_boxes,
                                                        scaling_coordinate_boxes)
from benchmark.transformations.bounds.lipschitz import FLOAT32_ALLOWANCE
from benchmark.transformations.bounds.photometric import EXP_REL
from benchmark.transformations.gaussian_blur import fourier_gaussian_blur
from benchmark.transformations.geometric import rotate_images, zoom_images
from benchmark.verification.margins import Method, margin_bounds
from benchmark.verification.network import cnn_layers, margin_layers
from benchmark.verification.subintervals import ring_edges, verify_outward

__all__ = [
    # the Defense API
    "ABSTAIN", "SURROGATE_ONLY", "Certificate", "ClassifierDefense", "Context", "Defense",
    "parameter_sampler", "parameter_smoothing", "pixel_sampler", "pixel_smoothing",
    # transformations
    "Transformation", "check_images", "get_transformation",
    # statistics and certificate rules
    "SmoothingParams", "certify", "centre_out_order", "code_noise", "general_radius", "lattice_noise",
    "lower_confidence_bound", "parameter_lattice", "predict",
    "predict_log", "predict_many", "radii", "radius_rule", "radius_threshold", "sample_counts",
    "sample_counts_many", "sequential", "slice_rule", "spt_rule", "threshold_rule",
    # deterministic verification
    "Method", "cnn_layers", "margin_bounds", "margin_layers", "ring_edges", "verify_outward",
    # models
    "ModelSpec", "Normalize", "SmallCNN", "classifier_spec",
    # sound-bound tools
    "COORD_SLACK", "EXP_REL", "FLOAT32_ALLOWANCE", "U32", "VALUE_SLACK", "bilinear_range_batched", "fft_slack",
    "fourier_gaussian_blur", "rotate_images", "rotation_coordinate_boxes", "scaling_coordinate_boxes",
    "zoom_images",
    # errors and helpers
    "Accepts", "BenchError", "Registry", "in_cpu_slices", "load_robustbench_model", "progress_bar", "unknown_name",
]
