"""calibration/attention_split.py: the attention share is the predicted step less the step with free attention."""

import pytest

import perfmodel as pm
from calibration import attention_split
from perfmodel.spec.scenario import parse_scenario
from perfmodel.studies.observed.validation import load_cases


def test_split_adds_up_to_the_prediction_and_attention_grows_with_sequence():
    cases = {c["id"]: c for c in load_cases(attention_split.RUNS)}
    shares = []
    for cid in ("nemo_longseq_h100_llama2_7b_8k", "nemo_longseq_h100_llama2_7b_16k"):
        measured, attention, rest = attention_split.split(cases[cid])
        sc = parse_scenario(cases[cid]["scenario"])
        assert attention + rest == pytest.approx(pm.predict(sc).step_time_s)
        assert attention > 0 and rest > 0 and measured > 0
        shares.append(attention / (attention + rest))
    assert shares[1] > shares[0]
