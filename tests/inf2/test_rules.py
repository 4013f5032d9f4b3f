"""The tensor-parallel rules: each one passes and fails, at configuration or synthesis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_contracts.inf2 import KNOWN_MODELS, copies_loaded_in_turn, facts_from_config, memory_bytes
from project_config import ConfigError, from_cdk_json
from project_config.inf2 import settings_problems
from stacks.inf2_ec2 import check_bundle


def settings(**overrides: Any) -> Any:
    return from_cdk_json({f"inf2.{k}": v for k, v in overrides.items()}).inf2


def problems(model: str = "facebook/opt-13b", **overrides: Any) -> list[str]:
    return settings_problems(settings(model_id=model, **overrides), KNOWN_MODELS[model], model_id=model)


def test_opt_13b_with_degree_8_on_inf2_48xlarge_passes() -> None:
    assert problems(tensor_parallel_degree=8) == []


@pytest.mark.parametrize("degree", [3, 16])
def test_opt_13b_degrees_the_runtime_lacks_fail_at_configuration(degree: int) -> None:
    with pytest.raises(ConfigError) as err:
        settings(tensor_parallel_degree=degree)
    message = str(err.value)
    assert f"inf2.tensor_parallel_degree={degree}" in message and "1, 2, 4, 8, 24" in message


def test_degrees_must_divide_the_attention_heads() -> None:
    # OPT-13B has 40 heads: 24 is a supported degree, but 40 heads do not split over 24 cores.
    [message] = problems(tensor_parallel_degree=24)
    assert "40 attention heads" in message and "use one of 1, 2, 4, 8" in message
    assert problems("facebook/opt-30b", tensor_parallel_degree=8) == []  # 56 heads


def test_the_degree_cannot_exceed_the_instance_neuron_cores() -> None:
    with pytest.raises(ConfigError, match=r"inf2.xlarge has only 2 NeuronCores.*inf2.24xlarge or inf2.48xlarge"):
        settings(instance_type="inf2.xlarge", tensor_parallel_degree=8)
    assert settings(instance_type="inf2.24xlarge", tensor_parallel_degree=8).model_server.tensor_parallel_degree == 8


def test_the_instance_must_be_an_inf2_type() -> None:
    with pytest.raises(ConfigError, match=r"inf2.instance_type='trn1.32xlarge' is invalid.*inf2.xlarge"):
        settings(instance_type="trn1.32xlarge")


def test_a_model_too_large_for_the_degree_fails() -> None:
    # OPT-66B in fp16: 122 GiB of weights plus 4.5 GiB of KV cache > 4 x 16 GiB.
    [message] = problems("facebook/opt-66b", tensor_parallel_degree=4)
    assert "inf2.tensor_parallel_degree=4" in message and "more than the 64 GiB" in message
    assert "122.4 GiB of fp16 weights" in message and "raise the degree to 8" in message
    assert problems("facebook/opt-66b", tensor_parallel_degree=8) == []
    # OPT-13B on the two cores of an inf2.8xlarge: 24 GiB of weights fit in 32 GiB with a
    # small KV cache; 2048 positions for 8 sequences (12.5 GiB more) do not.
    assert problems(instance_type="inf2.8xlarge", tensor_parallel_degree=2, n_positions=512) == []
    [long_context] = problems(instance_type="inf2.8xlarge", tensor_parallel_degree=2, n_positions=2048, batch_size=8)
    assert "KV cache" in long_context and "lower n_positions or batch_size" in long_context


def test_the_weights_must_fit_in_the_host_memory() -> None:
    # OPT-13B in fp16: 23.9 GiB of weights, x1.2 = 28.7 GiB > the 16 GiB of an inf2.xlarge,
    # although its two NeuronCores (32 GiB of HBM) would hold them.
    [message] = problems(instance_type="inf2.xlarge", tensor_parallel_degree=2, dtype="fp16")
    assert "inf2.instance_type='inf2.xlarge' is invalid" in message
    assert "28.7 GiB of host memory" in message and "23.9 GiB of fp16 weights" in message
    assert "more than the 16 GiB of inf2.xlarge" in message
    assert "use inf2.8xlarge or inf2.24xlarge or inf2.48xlarge" in message
    assert problems(instance_type="inf2.48xlarge", tensor_parallel_degree=8, dtype="fp16") == []
    assert problems(instance_type="inf2.8xlarge", tensor_parallel_degree=2, dtype="fp16") == []
    # OPT-66B in fp32 (245 GiB, x1.2 = 294 GiB) does not fit in 128 GiB; fp16 would not either.
    host = [m for m in problems("facebook/opt-66b", instance_type="inf2.8xlarge", dtype="fp32",
                                tensor_parallel_degree=2) if "host memory" in m]  # fmt: skip
    assert len(host) == 1 and "use inf2.24xlarge or inf2.48xlarge" in host[0] and "inf2.dtype" not in host[0]
    # OPT-6.7B in fp32 (24.8 GiB, x1.2 = 29.8 GiB) misses an inf2.xlarge; fp16 (14.9 GiB) fits.
    [fp32] = problems("facebook/opt-6.7b", instance_type="inf2.xlarge", dtype="fp32", tensor_parallel_degree=2)
    assert "set inf2.dtype=fp16" in fp32
    assert problems("facebook/opt-6.7b", instance_type="inf2.xlarge", dtype="fp16", tensor_parallel_degree=2) == []


def test_synthesis_refuses_a_model_too_large_for_the_host(tmp_path: Path) -> None:
    bundle = bundle_manifest(tmp_path)
    with pytest.raises(ConfigError, match=r"inf2.instance_type='inf2.xlarge' is invalid.*host memory"):
        check_bundle(settings(bundle=str(bundle), instance_type="inf2.xlarge", tensor_parallel_degree=2))


def test_memory_follows_dtype_positions_and_batch() -> None:
    weights, cache = memory_bytes(KNOWN_MODELS["facebook/opt-13b"], dtype="fp16", n_positions=512, batch_size=4)
    assert round(weights / 2**30, 1) == 23.9  # ~25.7 GB: the seed's "26 GB of fp16 weights"
    assert cache == 2 * 40 * 512 * 4 * 5120 * 2
    weights32, cache32 = memory_bytes(KNOWN_MODELS["facebook/opt-13b"], dtype="fp32", n_positions=1024, batch_size=4)
    assert weights32 == 2 * weights and cache32 == 4 * cache


def test_n_positions_cannot_exceed_the_model() -> None:
    [message] = problems(n_positions=4096, tensor_parallel_degree=8, batch_size=1)
    assert "inf2.n_positions=4096" in message and "at most 2048" in message


def test_facts_from_config_json_match_the_published_size() -> None:
    config = {"num_attention_heads": 40, "hidden_size": 5120, "num_hidden_layers": 40, "ffn_dim": 20480,
              "vocab_size": 50272, "max_position_embeddings": 2048}  # fmt: skip
    facts = facts_from_config(config, source="config.json")
    assert abs(facts.num_parameters - KNOWN_MODELS["facebook/opt-13b"].num_parameters) / 12.85e9 < 0.01
    with pytest.raises(ValueError, match="num_attention_heads"):
        facts_from_config({"hidden_size": 8}, source="config.json")


def bundle_manifest(tmp_path: Path, **content: Any) -> Path:
    folder = tmp_path / "inf2"
    folder.mkdir()
    (folder / "bundle.tar.gz").write_bytes(b"x")
    body = {"schema": 1, "component": "inf2", "files": {"bundle.tar.gz": {"sha256": "0" * 64, "size": 1}}, **content}
    (folder / "manifest.json").write_text(json.dumps(body))
    return folder / "bundle.tar.gz"


def test_synthesis_reads_head_counts_from_the_bundled_config(tmp_path: Path) -> None:
    config = {"num_attention_heads": 12, "hidden_size": 96, "num_hidden_layers": 2, "vocab_size": 512,
              "max_position_embeddings": 2048}  # fmt: skip
    facts = facts_from_config(config, source="config.json of m")
    bundle = bundle_manifest(tmp_path, model={"source": "bundle", "name": "m", "facts": facts.as_dict()})
    check_bundle(settings(bundle=str(bundle), tensor_parallel_degree=4))
    with pytest.raises(ConfigError, match=r"m has 12 attention heads \(config.json of m\)"):
        check_bundle(settings(bundle=str(bundle), tensor_parallel_degree=8))


COMMIT = "a45aa65bbeb77c1558bc99bedc6779195462dab0"


def test_synthesis_needs_facts_for_an_unknown_hub_model(tmp_path: Path) -> None:
    bundle = bundle_manifest(tmp_path)
    with pytest.raises(ConfigError, match=r"inf2.model_id='acme/secret-7b'.*--model-dir"):
        check_bundle(settings(bundle=str(bundle), model_id="acme/secret-7b", model_revision=COMMIT))
    check_bundle(settings(bundle=str(bundle), model_id="facebook/opt-6.7b", model_revision=COMMIT,
                          tensor_parallel_degree=4))  # fmt: skip


def test_synthesis_refuses_a_hub_model_without_a_commit(tmp_path: Path) -> None:
    bundle = bundle_manifest(tmp_path)
    with pytest.raises(ConfigError, match=r"^inf2.model_revision=None is invalid: allowed is the commit of "
                                          r"facebook/opt-6.7b on the Hugging Face hub \(40 hex digits\)"):  # fmt: skip
        check_bundle(settings(bundle=str(bundle), model_id="facebook/opt-6.7b", tensor_parallel_degree=4))
    check_bundle(settings(bundle=str(bundle)))  # facebook/opt-13b: its commit is pinned
    with pytest.raises(ConfigError, match=r"^inf2.model_revision='main' is invalid: allowed is a full commit hash"):
        settings(model_revision="main")


def test_synthesis_refuses_settings_a_bundled_model_would_ignore(tmp_path: Path) -> None:
    facts = KNOWN_MODELS["facebook/opt-125m"]
    bundle = bundle_manifest(tmp_path, model={"source": "bundle", "name": "my-opt", "facts": facts.as_dict()})
    check_bundle(settings(bundle=str(bundle), tensor_parallel_degree=4))
    check_bundle(settings(bundle=str(bundle), tensor_parallel_degree=4, model_id="my-opt"))
    with pytest.raises(ConfigError) as err:
        check_bundle(settings(bundle=str(bundle), tensor_parallel_degree=4, model_id="facebook/opt-13b"))
    assert str(err.value).startswith("inf2.model_id='facebook/opt-13b' is invalid: allowed is unset or 'my-opt', "
                                     "the model the bundle ships")  # fmt: skip
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=rf"^inf2.model_revision='{COMMIT}' is invalid: allowed is unset"):
        check_bundle(settings(bundle=str(bundle), tensor_parallel_degree=4, model_revision=COMMIT))


def test_model_server_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"inf2.rolling_batch='auto' is invalid.*djl_python.transformers_neuronx"):
        settings(rolling_batch="auto")
    assert settings(rolling_batch="auto", entry_point="djl_python.transformers_neuronx").model_server.rolling_batch
    with pytest.raises(ConfigError, match=r"inf2.extra_properties=.*option.tensor_parallel_degree"):
        settings(extra_properties={"option.tensor_parallel_degree": "2"})
    with pytest.raises(ConfigError, match=r"inf2.requirements=\['sentencepiece'\].*pinned"):
        settings(requirements=["sentencepiece"])
    with pytest.raises(ConfigError, match=r"inf2.entry_point='handler.py'"):
        settings(entry_point="handler.py")
    assert settings().model_server.predict_timeout_s == 240  # the image's PREDICT_TIMEOUT
    with pytest.raises(ConfigError, match=r"inf2.predict_timeout_s=10 is invalid"):
        settings(predict_timeout_s=10)
    with pytest.raises(ConfigError, match=r"inf2.extra_properties=.*option.predict_timeout"):
        settings(extra_properties={"option.predict_timeout": "600"})


def test_every_bad_model_server_setting_is_listed_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        settings(n_positions=8, dtype="int8")
    assert str(err.value).splitlines() == [
        "inf2.n_positions=8 is invalid: allowed is a whole number from 16 to 8192",
        "inf2.dtype='int8' is invalid: allowed is one of fp16, bf16, fp32",
    ]


@pytest.mark.parametrize(
    ("instance_type", "degree", "extra", "copies"),
    [
        ("inf2.48xlarge", 8, {}, 3),  # 24 NeuronCores: nc0, nc8, nc16
        ("inf2.48xlarge", 24, {}, 1),
        ("inf2.24xlarge", 4, {}, 3),
        ("inf2.xlarge", 2, {}, 1),
        ("inf2.48xlarge", 8, {"load_on_devices": "nc0"}, 1),
        ("inf2.48xlarge", 8, {"load_on_devices": "nc0;nc8"}, 2),
        ("inf2.48xlarge", 8, {"option.parallel_loading": "true"}, 1),
    ],
)
def test_djl_loads_one_copy_per_degree_cores_one_after_another(
    instance_type: str, degree: int, extra: dict[str, str], copies: int
) -> None:
    assert copies_loaded_in_turn(instance_type=instance_type, degree=degree, extra_properties=extra) == copies


def test_the_host_waits_for_every_copy_djl_loads() -> None:
    # DJL opens its port only after the last copy: the host's /ping deadline covers all of them.
    assert settings(model_loading_timeout_s=1200).server.load_timeout_s == 3 * 1200 + 900
    assert settings(tensor_parallel_degree=24, model_id="facebook/opt-125m").server.load_timeout_s == 3600 + 900


def test_synthesis_refuses_a_volume_the_model_does_not_fit_on(tmp_path: Path) -> None:
    # OPT-13B in fp16: 120 GB of DLAMI and image, 2 x 25.7 GB of checkpoint and split copy, and
    # 2.6 GB of compiled graphs fit on the smallest volume allowed (200 GB).
    bundle = bundle_manifest(tmp_path)
    check_bundle(settings(bundle=str(bundle), volume_size_gb=200))
    # In fp32 they take twice that: 120 + 2 x 51.4 + 5.1 = 228 GB.
    with pytest.raises(ConfigError) as err:
        check_bundle(settings(bundle=str(bundle), volume_size_gb=200, dtype="fp32"))
    assert str(err.value) == (
        "inf2.volume_size_gb=200 is invalid: allowed is at least 228 for facebook/opt-13b: the DLAMI and the DJL "
        "image (120 GB), the bundle as downloaded (0 GB), the fp32 checkpoint and its split copy (103 GB), the "
        "compiled graphs (5 GB)"
    )
    check_bundle(settings(bundle=str(bundle), volume_size_gb=228, dtype="fp32"))
