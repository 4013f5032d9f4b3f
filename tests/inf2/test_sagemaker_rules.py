"""The rules of the inf2 bundle on SageMaker (llm_contracts/inf2_sagemaker.py): SageMaker's
limits against DJL's timeouts, and the ML storage volume against what the start writes."""

from __future__ import annotations

from llm_contracts import inf2_sagemaker as sm
from llm_contracts.inf2 import DTYPE_BYTES, KNOWN_MODELS


def test_the_instance_type_is_named_either_way() -> None:
    assert sm.sagemaker_instance_type("inf2.48xlarge") == sm.sagemaker_instance_type("ml.inf2.48xlarge")
    assert sm.ec2_instance_type("ml.inf2.24xlarge") == sm.ec2_instance_type("inf2.24xlarge") == "inf2.24xlarge"


def test_a_load_must_fit_sagemaker_s_health_check() -> None:
    fits = sm.timeout_problems(model_loading_timeout_s=3300, startup_s=3600, mode="realtime", predict_timeout_s=50)
    assert fits == []
    (problem,) = sm.timeout_problems(
        model_loading_timeout_s=3600, startup_s=3600, mode="realtime", predict_timeout_s=50
    )
    assert problem.startswith("inf2.model_loading_timeout_s=3600 is invalid: allowed is at most 3300")
    assert "inf2.startup_health_check_timeout_s (3600 s" in problem and "\n" not in problem


def test_a_real_time_call_must_end_before_sagemaker_gives_up() -> None:
    (problem,) = sm.timeout_problems(
        model_loading_timeout_s=600, startup_s=3600, mode="realtime", predict_timeout_s=240
    )
    assert problem.startswith("inf2.predict_timeout_s=240 is invalid: allowed is at most 59")
    # Asynchronous invocations are not bound by the 60 s.
    assert sm.timeout_problems(model_loading_timeout_s=600, startup_s=3600, mode="async", predict_timeout_s=240) == []


def test_the_volume_holds_the_download_the_split_copy_and_the_graphs() -> None:
    facts = KNOWN_MODELS["facebook/opt-13b"]
    weights = facts.num_parameters * DTYPE_BYTES["fp16"]
    hub = sm.volume_parts(weights_bytes=weights, bundle_bytes=20_000, downloads_weights=True)
    shipped = sm.volume_parts(weights_bytes=weights, bundle_bytes=weights, downloads_weights=False)
    # OPT-13B in fp16, 25.7 GB: twice that, a tenth for the graphs and the container's 5 GB.
    assert round(sum(p.gb for p in hub)) == round(sum(p.gb for p in shipped)) == 59
    assert sm.volume_problems(volume_size_gb=128, model_id="facebook/opt-13b", parts=hub) == []
    (problem,) = sm.volume_problems(volume_size_gb=30, model_id="facebook/opt-13b", parts=hub)
    assert problem.startswith("inf2.volume_size_gb=30 is invalid: allowed is at least 59 for facebook/opt-13b")
    assert "the weights downloaded from the hub (26 GB)" in problem
    huge = sm.volume_parts(weights_bytes=300 * 10**9, bundle_bytes=0, downloads_weights=True)
    assert "more than SageMaker's 512 GB" in sm.volume_problems(volume_size_gb=512, model_id="m", parts=huge)[0]
