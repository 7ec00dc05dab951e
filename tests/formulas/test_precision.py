"""Precision modes (``perfmodel.spec.precision``): each mode's model-state bytes per parameter,
by hand from its sources, and the byte table the formulas read."""

from __future__ import annotations

import pytest

from perfmodel.formulas.model_states import STATE_BYTES_PER_PARAM, state_bytes_per_param
from perfmodel.spec.errors import InputError
from perfmodel.spec.precision import PRESETS, SCENARIO_MODES, precision_mode

# (weights, gradients, optimizer states) bytes per parameter under Adam, by hand
BY_HAND = {
    "bf16": (2, 4, 4 + 4 + 4),                 # Megatron-Core distributed optimizer docs: 18
    "fp16": (2, 2, 4 + 4 + 4 + 4),             # ibid.: 20, the fp32 main gradient in the optimizer
    "fp8": (2, 4, 12),                         # TE keeps bf16 parameters; the fp8 copy is transient
    "fp4": (2, 4, 12),
    "megatron-mixed": (2, 4, 12),              # 18
    "zero-mixed": (2, 2, 12),                  # ZeRO sec. 3.1: 2 + 2 + K, K = 12: 16 psi
    "pytorch-amp": (4, 4, 4 + 4),              # fp32 params, grads, m, v: 16
    "pure-bf16": (2, 2, 2 + 2),                # 8
    "bf16-moments": (2, 2, 4 + 2 + 2),         # precision-aware optimizer: 12
    "fp8-per-tensor": (2, 4, 12),
    "fp8-blockwise": (2, 4, 12),
    "mxfp8": (2, 4, 12),
    "fp8-primary-weights": (1, 4, 12),         # fp8 parameters, fp32 master: 17
}


@pytest.mark.parametrize("name", [*SCENARIO_MODES, *PRESETS])
def test_state_bytes_per_parameter_by_hand(name):
    assert precision_mode(name).state_bytes == BY_HAND[name]


def test_totals():
    total = {n: sum(BY_HAND[n]) for n in BY_HAND}
    assert (total["bf16"], total["fp16"], total["zero-mixed"], total["pytorch-amp"], total["bf16-moments"],
            total["pure-bf16"], total["fp8-primary-weights"]) == (18, 20, 16, 16, 12, 8, 17)


def test_the_formulas_read_the_records():
    for name in SCENARIO_MODES:
        assert STATE_BYTES_PER_PARAM[name] == BY_HAND[name]
        w, g, o = state_bytes_per_param(name, grad_reduce_in_fp32=False)
        assert (w, g, o) == (BY_HAND[name][0], 2, BY_HAND[name][2])


def test_every_mode_has_a_source_and_low_precision_follows_compute():
    for mode in [*SCENARIO_MODES.values(), *PRESETS.values()]:
        assert mode.source
        assert mode.low_precision == (mode.compute in ("fp8", "fp4"))
    assert precision_mode("fp8").bytes_of("saved_gemm_input") == 1 == precision_mode("fp8").bytes_of("gather")
    assert precision_mode("bf16").bytes_of("gather") == 2


def test_unknown_mode_is_a_one_line_error():
    with pytest.raises(InputError, match="'int3' is not one of bf16, fp16, fp8, fp4"):
        precision_mode("int3")


def test_the_scenario_precisions_are_the_records():
    from perfmodel.spec.scenario import PRECISION_CHOICES
    assert PRECISION_CHOICES == tuple(SCENARIO_MODES)
