"""What the tests share: small scenarios built inline so tests do not depend on presets, and the
software stack in the keyword names formula tests use. ``tests/`` is on the path (pyproject's
``pythonpath``), so every tier imports ``support``; the fuzzing harness is ``support.fuzz``."""

from pathlib import Path

from perfmodel.spec.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[2]
TEST_DATA = ROOT / "tests" / "data"

GPT_SMALL = dict(name="gpt-small", num_layers=8, hidden_size=1024, num_attention_heads=16,
                 ffn_hidden_size=4096, vocab_size=32000)


def with_software(data: dict) -> dict:
    """A scenario mapping with the software options a test names at the top level moved under
    ``software:``, where they live (the tests' shorthand; the loader warns on the old place)."""
    from perfmodel.spec.software import SOFTWARE_FIELDS
    moved = {k: data[k] for k in data if k in SOFTWARE_FIELDS}
    if not moved:
        return data
    rest = {k: v for k, v in data.items() if k not in SOFTWARE_FIELDS}
    return {**rest, "software": {**data.get("software", {}), **moved}}


def scenario(**over):
    base = dict(hardware="h100-sxm", num_gpus=16, model=dict(GPT_SMALL), seq_length=2048,
                global_batch_size=64, micro_batch_size=1,
                parallelism=dict(tp=2, pp=2, vpp=1, cp=1, zero_stage=1), recompute="none", precision="bf16")
    par = over.pop("parallelism", {})
    base.update(with_software(over))
    base["parallelism"] = {**base["parallelism"], **par}
    return parse_scenario(base)


from perfmodel.spec.software import SoftwareStack  # noqa: E402

SW = SoftwareStack()
"""The default software stack (Megatron-Core's defaults), for formula tests."""


def sw(flash=None, selective_policy=None, pipeline_layout=None, **options) -> SoftwareStack:
    """A software stack from the keyword names formula tests used before the stack was one
    object: ``flash`` (a bool: the attention backend), ``selective_policy`` (what selective
    recompute keeps), ``pipeline_layout`` (a layout string, or its parsed stages)."""
    if flash is not None:
        options["attention_backend"] = "flash" if flash else "unfused"
    if selective_policy is not None:
        options["selective_recompute"] = selective_policy
    if pipeline_layout is not None:
        options["pipeline_layout"] = pipeline_layout if isinstance(pipeline_layout, str) else "|".join(pipeline_layout)
    return SoftwareStack(**options)


def spec_predict(scenario, efficiency=None, cost_model=None):
    """``perfmodel.engine.prediction.predict`` with the hardware spec's efficiencies named where a
    test gives none (the tests' shorthand: the engine itself requires them; ``perfmodel.predict``
    takes the calibration profile's)."""
    from perfmodel.engine.prediction import predict
    from perfmodel.spec.scenario import hardware_of
    return predict(scenario, efficiency or hardware_of(scenario).efficiency, cost_model)
