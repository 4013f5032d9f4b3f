"""LlmStack with LoRA adapters (``llm.adapters``): one adapter inference component each on the
model's component, the engine's LoRA settings following from the list, and every refusal in one
line naming the key. Adding an adapter changes neither the model nor its component."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from llm_contracts.manifest import PAYLOAD_MANIFEST, write_manifest
from project_config import ConfigError, load_config
from tests.infra.helpers import Synthesized, cdk_context, make_artifacts, resources_of, synthesize

BASE_SOURCE = "example/base-model"
COMPONENTS = {"llm.endpoint_mode": "inference-component"}


def with_adapters(root: Path, ranks: dict[str, int], *, built_for: str = BASE_SOURCE) -> Path:
    """Stand-in artifacts whose llm payload records `BASE_SOURCE`, with an adapter archive of each rank."""
    artifacts = make_artifacts(root, ("llm",))
    llm = artifacts / "llm"
    write_manifest(llm, "llm", {}, model={"source": BASE_SOURCE})  # what the builder records of the model
    for name, rank in ranks.items():
        archive = llm / "adapters" / name / f"{name}.tar.gz"
        archive.parent.mkdir(parents=True)
        archive.write_bytes(gzip.compress(f"adapter {name}".encode()))
        write_manifest(archive.parent, "payload", {archive.name: archive}, name=PAYLOAD_MANIFEST)
        write_manifest(llm / "adapters" / name, "llm-adapter", {}, adapter={"name": name, "rank": rank,
                       "archive_sha256": "0" * 64}, base={"source": built_for})  # fmt: skip
    return artifacts


@pytest.fixture(scope="module")
def two_and_three(tmp_path_factory: pytest.TempPathFactory) -> tuple[Synthesized, Synthesized]:
    artifacts = with_adapters(tmp_path_factory.mktemp("artifacts"), {"support": 8, "legal": 16, "finance": 8})

    def synth(names: list[str]) -> Synthesized:
        return synthesize(tmp_path_factory.mktemp("cdk.out"), artifacts, may_leave_out=("Gpt2Stack", "GptjStack",
                          "Inf2Stack"), **COMPONENTS, **{"llm.adapters": names})  # fmt: skip

    return synth(["support", "legal"]), synth(["support", "legal", "finance"])


def test_each_adapter_is_a_component_on_the_model_s_and_lora_is_on(two_and_three: tuple[Synthesized, ...]) -> None:
    template = two_and_three[0].template_json("LlmStack")
    components = resources_of(template, "AWS::SageMaker::InferenceComponent")
    bases = [c for c in components.values() if "BaseInferenceComponentName" not in c["Properties"]["Specification"]]
    adapters = [c for c in components.values() if "BaseInferenceComponentName" in c["Properties"]["Specification"]]
    assert len(bases) == 1 and len(adapters) == 2
    for adapter in adapters:
        spec = adapter["Properties"]["Specification"]
        assert spec["BaseInferenceComponentName"] == bases[0]["Properties"]["InferenceComponentName"]
        assert set(spec) == {"BaseInferenceComponentName", "Container"}
    (model,) = resources_of(template, "AWS::SageMaker::Model").values()
    env = model["Properties"]["PrimaryContainer"]["Environment"]
    assert {k: env[k] for k in env if "LORA" in k} == {
        "SM_VLLM_ENABLE_LORA": "true", "SM_VLLM_MAX_LORAS": "4", "SM_VLLM_MAX_LORA_RANK": "16",
        "SM_VLLM_MAX_CPU_LORAS": "16", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true",
    }  # fmt: skip
    assert {"AdapterComponentNamesupport", "AdapterComponentNamelegal"} <= set(template["Outputs"])


def test_adding_an_adapter_touches_neither_the_model_nor_its_component(two_and_three: tuple[Synthesized, ...]) -> None:
    """The engine keeps running: the Model (its image, environment, data) and the base component
    are the same resources with the same properties; only the new adapter's resources are added
    (the engine's LoRA limits are settings of their own, not derived from the list)."""
    before, after = (s.template_json("LlmStack") for s in two_and_three)

    def bases(template: dict[str, Any]) -> dict[str, Any]:
        found = resources_of(template, "AWS::SageMaker::InferenceComponent")
        return {k: v for k, v in found.items() if "BaseInferenceComponentName" not in v["Properties"]["Specification"]}

    added = set(resources_of(after, "AWS::SageMaker::InferenceComponent")) - set(
        resources_of(before, "AWS::SageMaker::InferenceComponent")
    )
    assert len(added) == 1 and bases(before) == bases(after)
    assert resources_of(before, "AWS::SageMaker::Model") == resources_of(after, "AWS::SageMaker::Model")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"llm.adapters": ["support"]},
            "llm.adapters=['support'] is invalid: allowed is none without inference-component mode",
        ),
        (
            {**COMPONENTS, "llm.adapters": ["no_underscore"]},
            "llm.adapters=['no_underscore'] is invalid: allowed is a list of adapter names",
        ),
        (
            {**COMPONENTS, "llm.adapters": ["a", "a"]},
            "llm.adapters=['a', 'a'] is invalid: allowed is a list of adapter names",
        ),
        (
            {**COMPONENTS, "llm.adapters": ["a"], "llm.max_lora_rank": 12},
            "llm.max_lora_rank=12 is invalid: allowed is one of 1, 8, 16",
        ),
        (
            {**COMPONENTS, "llm.adapters": ["a"], "llm.max_loras": 2, "llm.max_cpu_loras": 1},
            "llm.max_cpu_loras=1 is invalid: allowed is at least max_loras (2)",
        ),
    ],
    ids=lambda value: str(value)[:50],
)
def test_a_bad_adapter_setting_fails_in_one_line(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(cdk_context(**overrides))
    assert message in str(raised.value) and "\n" not in str(raised.value), raised.value


def test_an_adapter_of_another_model_or_rank_is_refused_at_synthesis(tmp_path: Path) -> None:
    from project_config.llm import check_adapters

    def settings(artifacts: Path, **extra: Any) -> Any:
        return load_config(cdk_context(**{"project.artifacts_dir": str(artifacts), **COMPONENTS, **extra})).llm

    other = with_adapters(tmp_path / "other", {"support": 8}, built_for="someone/else")
    with pytest.raises(
        ConfigError,
        match=r"support was built for someone/else; rebuild it: python -m artifacts_builder lora --name support",
    ):
        check_adapters(settings(other, **{"llm.adapters": ["support"]}))
    wide = with_adapters(tmp_path / "wide", {"support": 64})
    with pytest.raises(
        ConfigError,
        match=r"llm.max_lora_rank=16 is invalid: allowed is a rank that takes adapter support's r=64: 64, 128",
    ):
        check_adapters(settings(wide, **{"llm.adapters": ["support"]}))
    from llm_contracts.manifest import ManifestError

    with pytest.raises(ManifestError, match="build it: python -m artifacts_builder lora --name missing"):
        check_adapters(settings(wide, **{"llm.adapters": ["missing"]}))
