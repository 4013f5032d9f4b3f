"""The test tiers: tests/conftest.py marks each test with one (docs/DEVELOPING.md describes them).
A module of its own, so that other tests read the tiers without importing a conftest."""

from __future__ import annotations

#: The tiers, each by the fixtures that put a test in it (directly or through another fixture):
#: a new test falls into the tier of what it uses. A test of none is ``fast``: no server, no
#: deploy, no artifact build, no synthesis (``make test-fast``). The first tier a test's fixtures
#: name is its tier; ``e2e`` also covers every test under tests/e2e.
TIERS: dict[str, frozenset[str]] = {
    # the real CDK CLI against the local AWS
    "e2e": frozenset({"local_aws", "cdk", "bootstrapped", "base", "updated", "e2e_artifacts", "neuron_ami"}),
    # a process that serves: the GPT-2 container, the toolkit's model server, the local AWS
    "server": frozenset(
        {
            "server",
            "running",
            "running_tar",
            "serve",
            "aws",
            "echo_image",
            "free_port",
            "lmi_server",
            "lmi_server_queue_of_2",
        }
    ),
    # the artifacts builder on a tiny model
    "build": frozenset(
        {
            "tiny_out",
            "model_tar",
            "model_dir",
            "quantized",
            "build",
            "tiny_build",
            "tiny_artifacts",
            "tiny_model_dir",
            "tiny_model",
            "gptj_build",
            "builder_cli",
            "llm_build",
            "tiny_sources",
            "lmi_bundle",
        }
    ),
    # CDK synthesis of the app (the jsii runtime: seconds per app), or the CDK CLI
    "synth": frozenset({"synth", "synth_some", "synthesize_at", "full_app", "synth_inf2", "tiny_template", "cdk_cli"}),
    # imports or runs something slow that is none of the above (the SageMaker SDK)
    "slow": frozenset({"sdk_image_uris", "qemu_haswell", "vllm_quantization"}),
}
