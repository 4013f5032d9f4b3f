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
            "adapters_endpoint",
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
            "lora_base",
        }
    ),
    # CDK synthesis of the app (the jsii runtime: seconds per app), or the CDK CLI
    "synth": frozenset({"synth", "synth_some", "synthesize_at", "full_app", "synth_inf2", "tiny_template", "cdk_cli"}),
    # imports or runs something slow that is none of the above (the SageMaker SDK)
    "slow": frozenset({"sdk_image_uris", "qemu_haswell", "vllm_quantization"}),
}


#: The end-to-end modules that run the vLLM engine: one group of their own (make test).
VLLM_E2E = ("tests/e2e/test_vllm_engine.py", "tests/e2e/test_llm_stack.py", "tests/e2e/test_llm_adapters.py")
#: The other end-to-end modules in two groups of about equal time (docs/DEVELOPING.md, "Where make
#: test's time goes": at 459962d e2e-2 took 771 s of one worker's time and e2e-1 548 s, the
#: critical path; test_local_aws.py's 106 s moved over), each on a worker with a local AWS of its
#: own; a new module joins the first unless it is listed here.
E2E_SECOND = (
    "tests/e2e/test_sagemaker_deploy.py",
    "tests/e2e/test_inf2_sagemaker.py",
    "tests/e2e/test_invoke_endpoint.py",
    "tests/e2e/test_loadtest.py",
    "tests/e2e/test_inputs.py",
)


def xdist_group_of(module: str) -> str:
    """The group of a module's tests, which one pytest-xdist worker runs together under ``--dist
    loadgroup`` (make test): the module itself, whose module-scoped fixtures (a synthesized app, a
    deploy) are made once; an end-to-end module's group shares a session's local AWS, bootstrap and
    payloads (tests/e2e/conftest.py), made once a group."""
    if module in VLLM_E2E:
        return "e2e-vllm"
    if module.startswith("tests/e2e/"):
        return "e2e-2" if module in E2E_SECOND else "e2e-1"
    return module
