"""What a long-lived process (the app, a notebook) keeps between predictions stays bounded, however
many different jobs a user sends: every memo on the warm predict's path has a fixed size."""

from __future__ import annotations

import perfmodel as pm
from perfmodel.engine import band, job, prediction
from perfmodel.spec import attention_head_dim


def test_the_memos_of_the_warm_predict_path_have_fixed_sizes():
    assert prediction._run_goodput.cache_info().maxsize == prediction.GOODPUTS
    assert band._band_in.cache_info().maxsize == band.JOB_BANDS
    assert attention_head_dim._head_dim_factor_of.cache_info().maxsize is not None


def test_many_different_jobs_keep_the_memos_within_their_sizes():
    sc = pm.load_scenario("perfmodel/data/example_scenario.yaml")
    hw = pm.resolve(sc).job.hardware
    for i in range(job.SHARED_JOBS + 20):      # a new hardware object and GPU count each time
        job._hardware_identity(hw.model_copy())
        job._placed(hw, 8 * (i + 1))
    assert len(job._hardware_identities) <= job.SHARED_JOBS
    assert len(job._placements) <= job.PLACED
    for _ in range(job.SHARED_JOBS + 20):      # a new job object each time
        job.shared_job(pm.resolve(sc).job, recompute=True)
    assert len(job._shared_jobs) <= job.SHARED_JOBS and len(job._seen_jobs) <= job.SHARED_JOBS
