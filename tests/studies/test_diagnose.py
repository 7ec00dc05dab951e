"""Diagnosis on synthetic runs: each made by perturbing one term of the model (a slower
network, a starved input pipeline, a slower host, a longer pipeline bubble), observed the way a
user would observe it (step times of a series, a framework's timers, GPU utilisation, the data
loader's wait). The top-ranked cause must be the perturbed term in at least 9 of the 10 cases.

The perturbations are chosen to leave a visible gap (10% to 200% of the step), not tuned to the
ranking: every case states its factor and what it observes, and its step times carry +-1-2% of
measurement noise (``NOISE``). One step time alone cannot tell the
levers apart (each fits it exactly); ``test_one_step_time_ranks_by_elasticity`` shows what it does.
"""

from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.spec.observed.measured import MeasuredRun
from perfmodel.studies.observed.diagnose import band_of
from perfmodel.studies.views.perturb import Speeds, gpu_idle_s, perturbed

BASE = {"hardware": "h100-sxm", "model": "llama3-8b", "seq_length": 8192, "micro_batch_size": 1, "precision": "bf16"}
SHORT = {**BASE, "seq_length": 2048}
PP = {**BASE, "model": "llama3-70b", "num_gpus": 64, "parallelism": {"tp": 8, "pp": 4}}


NOISE = (0.02, -0.02, 0.01)
"""Measurement noise on the step times of a case's first, second and third run (a steady step
varies by about 1% between iterations; twice that here)."""


def _run(scenario: dict, lever: str, speed: float, timers=(), util=False, data_wait=False, noise=0.0):
    """The scenario measured as if ``lever`` ran at ``speed`` times its modelled speed: its step
    time (times 1 + ``noise``), and the named timers (name -> the terms it times), GPU
    utilisation and loader wait."""
    sc = pm.parse_scenario(scenario)
    bd = perturbed(pm.resolve(sc, profile=None), Speeds().times(lever, speed))
    step = sum(bd.values())
    m = MeasuredRun(step_time_s=step * (1.0 + noise),
                    timers_s={name: sum(bd[t] for t in terms) for name, terms in timers},
                    gpu_utilisation=1.0 - gpu_idle_s(bd) / step if util else None,
                    data_wait_s=bd["data_wait"] if data_wait else None)
    return pm.observed_run(sc, m, f"{sc.num_gpus} GPUs, batch {sc.global_batch_size}")


def _series(scenarios, lever, speed, **observed):
    return [_run(sc, lever, speed, noise=NOISE[i], **observed) for i, sc in enumerate(scenarios)]


GRAD_SYNC = (("all-grads-sync", ("dp_comm",)), ("optimizer", ("optimizer",)))
LOADER = (("batch-generator", ("data_wait",)),)
PIPELINE = (("forward-recv", ("pp_comm", "pipeline_bubble")),)
CASES = {
    # a network 10x slower than modelled (a NIC falling back to a slow path)
    "network, weak-scaling series": ("dp_comm", _series(
        [{**BASE, "num_gpus": n, "global_batch_size": 2 * n} for n in (8, 32, 128)], "scale_out_bandwidth", 0.1)),
    "network, Megatron timers": ("dp_comm", _series(
        [{**BASE, "num_gpus": 64, "global_batch_size": 128}], "scale_out_bandwidth", 0.1, timers=GRAD_SYNC)),
    "network, 70B pipeline series": ("dp_comm", _series(
        [{**PP, "num_gpus": n, "global_batch_size": n // 4} for n in (64, 128, 256)], "scale_out_bandwidth", 0.1)),
    # a loader 10,000x slower than local NVMe (tokenising on the fly)
    "input, loader wait": ("data_wait", _series(
        [{**BASE, "num_gpus": 64, "global_batch_size": 128}], "input_pipeline", 1e-4, data_wait=True)),
    "input, batch-generator timer": ("data_wait", _series(
        [{**SHORT, "num_gpus": 16, "global_batch_size": 64}], "input_pipeline", 1e-4, timers=LOADER)),
    "input, utilisation over a series": ("data_wait", _series(
        [{**SHORT, "num_gpus": n, "global_batch_size": 64} for n in (8, 16, 32)], "input_pipeline", 1e-4, util=True)),
    # a host 20x slower than eager PyTorch's 15 us per op (a Python-heavy loop, a contended CPU)
    "host, micro-batch series": ("overheads", _series(
        [{**SHORT, "model": "llama2-7b", "num_gpus": 8, "global_batch_size": 64, "micro_batch_size": mbs}
         for mbs in (1, 2, 4)], "host_overhead", 0.05)),
    "host, utilisation and loader timer": ("overheads", _series(
        [{**SHORT, "num_gpus": 8, "global_batch_size": 64}], "host_overhead", 0.05, timers=LOADER, util=True)),
    # a bubble 3x longer than the schedule's (unbalanced stages)
    "bubble, batch series": ("pipeline_bubble", _series(
        [{**PP, "global_batch_size": g} for g in (16, 32, 64)], "pipeline_bubble", 0.33)),
    "bubble, pipeline timers": ("pipeline_bubble", _series(
        [{**PP, "global_batch_size": 32}], "pipeline_bubble", 0.33, timers=PIPELINE)),
}


@pytest.fixture(scope="module")
def diagnoses():
    return {name: pm.diagnose(runs, profile=None) for name, (_, runs) in CASES.items()}


def test_the_perturbed_term_ranks_first_in_nine_of_ten(diagnoses):
    hits = {name: diagnoses[name].causes[0].term == term for name, (term, _) in CASES.items()}
    missed = {n: (CASES[n][0], diagnoses[n].causes[0].term) for n, ok in hits.items() if not ok}
    assert len(hits) == 10
    assert sum(hits.values()) >= 9, f"missed (expected, top): {missed}"


def test_the_gap_is_real_in_every_case(diagnoses):
    """Each perturbation leaves a visible gap: at least 10% in one of the case's runs."""
    for name, d in diagnoses.items():
        assert max(abs(r.gap_frac) for r in d.runs) >= 0.10, name


def test_the_fitted_speed_recovers_the_perturbation(diagnoses):
    """Where the top cause is the perturbed lever, its fitted speed is the one applied, within the
    noise (the prior pulls it only slightly towards 1)."""
    applied = {"dp_comm": 0.1, "data_wait": 1e-4, "overheads": 0.05, "pipeline_bubble": 0.33}
    for name, (term, _) in CASES.items():
        top = diagnoses[name].causes[0]
        if top.term == term:
            assert top.speed_factor == pytest.approx(applied[term], rel=0.1), name


def test_a_slower_kernel_is_diagnosed_as_compute():
    """The control: kernels at 80% of their modelled speed, one step time."""
    d = pm.diagnose([_run({**BASE, "num_gpus": 64, "global_batch_size": 128}, "peak_flops", 0.8)], profile=None)
    assert d.causes[0].term == "compute" and d.causes[0].speed_factor == pytest.approx(0.8, rel=0.02)


def test_one_step_time_ranks_by_elasticity():
    """A single step time fits every lever exactly, so the ranking is the prior's: the lever that
    needs the smallest change, the one the step depends on most (compute, for a compute-bound job)."""
    d = pm.diagnose([_run({**BASE, "num_gpus": 64, "global_batch_size": 128}, "scale_out_bandwidth", 0.5)],
                    profile=None)
    assert d.causes[0].lever == "peak_flops" and d.causes[0].explained_frac > 0.99


def test_no_gap_means_no_cause():
    d = pm.diagnose([_run({**BASE, "num_gpus": 8, "global_batch_size": 64}, "peak_flops", 1.0)], profile=None)
    assert d.runs[0].gap_frac == pytest.approx(0.0, abs=1e-12)
    assert d.causes == () and d.no_cause_weight == 1.0       # no lever explains a run better than itself


def test_a_scaling_series_is_read_as_such(diagnoses):
    """network, weak-scaling series: 8 GPUs (one node) have no scale-out traffic; with the network
    10x slower, measured and predicted efficiency part at the next count (32 GPUs)."""
    d = diagnoses["network, weak-scaling series"]
    assert [p.num_gpus for p in d.scaling] == [8, 32, 128]
    assert d.scaling[0].measured_efficiency == d.scaling[0].predicted_efficiency == 1.0   # the reference
    assert d.parts_at_num_gpus == 32
    assert "efficiency_drops" in [s.key for s in d.symptoms]


def test_symptoms_from_the_measurements(diagnoses):
    """The loader waiting for a large share of the step shows the 'GPUs idle' row; a first
    iteration 5x the steady step the 'slow start' row."""
    assert "gpu_idle" in [s.key for s in diagnoses["input, loader wait"].symptoms]
    sc = pm.parse_scenario({**BASE, "num_gpus": 8, "global_batch_size": 64})
    d = pm.diagnose([pm.observed_run(sc, {"step_times_s": [30.0, 6.0, 6.0, 6.0]})], profile=None)
    (slow,) = [s for s in d.symptoms if s.key == "slow_start"]
    assert slow.figures["first_over_steady"] == pytest.approx(5.0)


def test_a_batch_plateau_is_a_symptom():
    """Twice the batch on the same GPUs buys 2% more tokens/s per GPU: under PLATEAU_GAIN (5%)."""
    sc = pm.parse_scenario({**BASE, "num_gpus": 8, "global_batch_size": 64})
    runs = [pm.observed_run(sc, {"tokens_per_s_per_gpu": 10_000.0}, "a"),
            pm.observed_run(sc.model_copy(update={"global_batch_size": 128}), {"tokens_per_s_per_gpu": 10_200.0}, "b")]
    d = pm.diagnose(runs, profile=None)
    (p,) = [s for s in d.symptoms if s.key == "batch_plateau"]
    assert p.figures["gain"] == pytest.approx(0.02)


def test_band_of_reads_a_band_where_the_prediction_has_one():
    """The error band (issue 33) adds ``band`` to predict's JSON; diagnose shows it where it exists."""
    class WithBand:
        def to_dict(self):
            return {"band": {"step_time_s": {"p10": 1.0, "p50": 1.2, "p90": 1.5}}}

    class Without:
        def to_dict(self):
            return {}
    assert band_of(WithBand()) == {"p10": 1.0, "p50": 1.2, "p90": 1.5}
    assert band_of(Without()) is None


def test_diagnosis_json_is_strict_and_complete(diagnoses):
    import json

    from perfmodel.cli.common import to_json
    d = json.loads(to_json(diagnoses["bubble, pipeline timers"].to_dict()))
    assert {"runs", "causes", "no_cause_weight", "scaling", "symptoms", "sensitivity"} <= set(d)
    top = d["causes"][0]
    assert {"term", "lens", "patterns", "measure_next", "action", "weight"} <= set(top)
    assert top["lens"] == pm.LENS[top["term"]]
    assert sum(c["weight"] for c in d["causes"]) + d["no_cause_weight"] == pytest.approx(1.0)
