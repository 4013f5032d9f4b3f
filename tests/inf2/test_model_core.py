"""model.py's core on the CPU: a tiny random OPT through transformers, DJL faked by the
mirror of its Input/Output; only the Neuron sampler is replaced (no Neuron device here)."""

from __future__ import annotations

import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

PROMPTS = ["Hello, I am a language model,", "Welcome to Amazon Elastic Compute Cloud,", "lithium battery"]


@pytest.fixture(scope="module")
def config(model_py: ModuleType, tiny_model_dir: Path) -> Any:
    return model_py.ServerConfig.from_properties(
        {"model_id": str(tiny_model_dir), "n_positions": "64", "batch_size": "2", "tensor_parallel_degree": "8",
         "dtype": "fp32", "max_new_tokens": "8"}
    )  # fmt: skip


@pytest.fixture(scope="module")
def service(model_py: ModuleType, tiny_model: tuple[Any, Any], config: Any) -> Any:
    model, tokenizer = tiny_model
    generator = model_py.TransformersGenerator(
        model, pad_id=tokenizer.eos_token_id, eos_id=tokenizer.eos_token_id, batch_size=config.batch_size
    )
    return model_py.TextGenerator(tokenizer, generator, config)


def greedy_alone(tiny_model: tuple[Any, Any], prompt: str, new: int) -> list[int]:
    """The reference: one unpadded prompt through transformers' own generate."""
    model, tokenizer = tiny_model
    ids = torch.tensor([tokenizer(prompt)["input_ids"]])
    out = model.generate(ids, max_new_tokens=new, min_new_tokens=1, do_sample=False,
                         pad_token_id=tokenizer.eos_token_id)  # fmt: skip
    tokens = out[0, ids.shape[1] :].tolist()
    return tokens[: tokens.index(tokenizer.eos_token_id) + 1] if tokenizer.eos_token_id in tokens else tokens


def test_request_is_parsed_with_defaults(model_py: ModuleType, config: Any) -> None:
    request = model_py.parse_request({"text": "Hello", "seq_length": 32, "top_k": 5}, config)
    assert request.texts == ("Hello",)
    assert request.seq_length == 32 and request.max_new_tokens is None
    assert request.sampling == model_py.Sampling(do_sample=True, top_k=5, top_p=1.0, temperature=1.0)


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (["Hello"], "JSON object"),
        ({"prompt": "Hello"}, "'prompt'"),
        ({"text": ""}, "text="),
        ({"text": []}, "text="),
        ({"text": ["ok", 3]}, "text="),
        ({"text": "Hi", "seq_length": 10, "max_new_tokens": 5}, "both"),
        ({"text": "Hi", "seq_length": 65}, "seq_length=65"),
        ({"text": "Hi", "seq_length": "10"}, "seq_length='10'"),
        ({"text": "Hi", "max_new_tokens": True}, "max_new_tokens=True"),
        ({"text": "Hi", "max_new_tokens": 0}, "max_new_tokens=0"),
        ({"text": "Hi", "top_p": 0}, "top_p=0"),
        ({"text": "Hi", "temperature": -1}, "temperature=-1"),
        ({"text": "Hi", "do_sample": "yes"}, "do_sample='yes'"),
        ({"text": ["Hi"] * 65}, "at most 64"),
        ({"text": ["ok", "a\ud800b"]}, "text[1] contains '\\ud800'"),
    ],
)
def test_bad_requests_are_refused_with_the_field(model_py: ModuleType, config: Any, body: Any, named: str) -> None:
    with pytest.raises(model_py.RequestError) as err:
        model_py.parse_request(body, config)
    assert named in str(err.value)
    assert err.value.code == 400


def test_batched_greedy_generation_matches_each_prompt_alone(service: Any, tiny_model: tuple[Any, Any]) -> None:
    # Three prompts of different lengths with a batch of 2: two generate calls, left padding.
    [result] = service.run([{"text": PROMPTS, "max_new_tokens": 6, "do_sample": False}])
    _, tokenizer = tiny_model
    for prompt, text, detail in zip(PROMPTS, result["outputs"], result["details"], strict=True):
        expected = greedy_alone(tiny_model, prompt, 6)
        assert detail["generated_tokens"] == len(expected)
        assert detail["generated_text"] == tokenizer.decode(expected, skip_special_tokens=True)
        assert text == tokenizer.decode(tokenizer(prompt)["input_ids"] + expected, skip_special_tokens=True)
        assert detail["finish_reason"] == ("eos" if expected[-1] == tokenizer.eos_token_id else "length")


def test_seq_length_counts_the_prompt_as_in_the_seed(service: Any, tiny_model: tuple[Any, Any]) -> None:
    _, tokenizer = tiny_model
    longest = max(len(tokenizer(p)["input_ids"]) for p in PROMPTS[:2])
    [result] = service.run([{"text": PROMPTS[:2], "seq_length": longest + 4, "do_sample": False}])
    for detail in result["details"]:
        assert 1 <= detail["generated_tokens"] <= 4
        assert detail["finish_reason"] == "eos" or detail["generated_tokens"] == 4


def test_sampling_settings_reach_the_generator(service: Any) -> None:
    torch.manual_seed(0)
    [a] = service.run([{"text": "Hello", "max_new_tokens": 8, "top_k": 1}])
    [b] = service.run([{"text": "Hello", "max_new_tokens": 8, "do_sample": False}])
    assert a["outputs"] == b["outputs"]  # top_k=1 sampling is greedy


def test_a_fault_in_one_request_spares_the_others(service: Any, model_py: ModuleType, monkeypatch: Any) -> None:
    class FaultyTokenizer:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __call__(self, text: str) -> Any:
            if text == "boom":
                raise TypeError("tokenizer fault")
            return self.inner(text)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(service, "tokenizer", FaultyTokenizer(service.tokenizer))
    good, bad = service.run([{"text": "Hello", "max_new_tokens": 2}, {"text": "boom"}])
    assert isinstance(good, dict) and len(good["outputs"]) == 1
    assert isinstance(bad, model_py.RequestError) and bad.code == 500 and "TypeError: tokenizer fault" in str(bad)


def test_too_long_requests_are_refused(service: Any, model_py: ModuleType) -> None:
    short, long_prompt, bad_seq = service.run(
        [
            {"text": "Hello", "max_new_tokens": 2, "do_sample": False},
            {"text": "Hello " * 80, "max_new_tokens": 8},
            {"text": "Hello, I am a language model,", "seq_length": 3},
        ]
    )
    assert isinstance(short, dict)
    assert isinstance(long_prompt, model_py.RequestError) and "n_positions=64" in str(long_prompt)
    assert long_prompt.code == 413
    assert isinstance(bad_seq, model_py.RequestError) and "seq_length=3" in str(bad_seq)


class FakeNeuronSampler:
    """transformers-neuronx's OPTForSampling.sample, signature and output layout: the
    (left-padded) prompt followed by the sampled tokens, one row per compiled batch slot."""

    def __init__(self, continuation: list[int]) -> None:
        self.continuation = continuation
        self.calls: list[dict[str, Any]] = []

    def sample(self, input_ids: torch.Tensor, sequence_length: int, start_ids: Any = None, top_k: int = 50) -> Any:
        self.calls.append({"input_ids": input_ids.tolist(), "sequence_length": sequence_length,
                           "start_ids": start_ids.tolist(), "top_k": top_k})  # fmt: skip
        new = self.continuation[: sequence_length - input_ids.shape[1]]
        return torch.cat([input_ids, torch.tensor([new] * input_ids.shape[0])], dim=1)


def test_neuron_generator_fills_the_compiled_batch_and_marks_padding(model_py: ModuleType) -> None:
    sampler = FakeNeuronSampler([7, 8, 2, 9, 9])
    generator = model_py.NeuronGenerator(sampler, pad_id=1, eos_id=2, batch_size=4)
    out = generator.generate([[5, 6, 7], [5]], 8, model_py.Sampling(do_sample=False))
    call = sampler.calls[0]
    assert call["input_ids"] == [[5, 6, 7], [1, 1, 5], [1, 1, 5], [1, 1, 5]]
    assert call["start_ids"] == [0, 2, 2, 2]
    assert call["top_k"] == 1 and call["sequence_length"] == 8
    assert out == [[7, 8, 2], [7, 8, 2]]  # cut after the end-of-sequence token, fill rows dropped


def test_neuron_generator_refuses_settings_its_sampler_lacks(model_py: ModuleType) -> None:
    generator = model_py.NeuronGenerator(FakeNeuronSampler([1]), pad_id=1, eos_id=2, batch_size=1)
    generator.check(model_py.Sampling(top_k=10))
    with pytest.raises(model_py.RequestError, match=r"temperature=0\.5"):
        generator.check(model_py.Sampling(temperature=0.5))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TimedGenerator:
    """A generator whose passes take `overhead` seconds plus `rate` per position of their sequence length."""

    def __init__(self, clock: FakeClock, rate: float, batch_size: int, overhead: float = 0.0) -> None:
        self.clock, self.rate, self.batch_size, self.overhead = clock, rate, batch_size, overhead
        self.passes: list[tuple[int, int]] = []

    def check(self, sampling: Any) -> None:
        return None

    def generate(self, prompts: Any, sequence_length: int, sampling: Any) -> list[list[int]]:
        self.clock.now += self.overhead + self.rate * sequence_length
        self.passes.append((len(prompts), sequence_length))
        return [[7] for _ in prompts]


@pytest.fixture
def timed(model_py: ModuleType, tiny_model: tuple[Any, Any]) -> tuple[Any, TimedGenerator]:
    """predict_timeout 60 s (54 s for generating), passes of 2 rows at 0.5 s per position."""
    config = model_py.ServerConfig.from_properties(
        {"model_id": "x", "n_positions": "64", "batch_size": "2", "predict_timeout": "60"}
    )
    clock = FakeClock()
    generator = TimedGenerator(clock, 0.5, 2)
    return model_py.TextGenerator(tiny_model[1], generator, config, clock=clock), generator


def test_calibration_times_a_short_and_a_full_length_pass(timed: tuple[Any, TimedGenerator]) -> None:
    service, generator = timed
    cost = service.calibrate()
    assert (cost.overhead_s, cost.per_position_s) == (0, 0.5)
    assert generator.passes == [(1, 8), (1, 64)]
    assert service.config.budget_s == 54


@pytest.fixture
def opt_like(model_py: ModuleType, tiny_model: tuple[Any, Any]) -> tuple[Any, TimedGenerator]:
    """512 positions, a 50 s predict timeout (45 s for generating); each call 3 s plus 50 ms a position."""
    config = model_py.ServerConfig.from_properties(
        {"model_id": "x", "n_positions": "512", "batch_size": "1", "predict_timeout": "50"}
    )
    clock = FakeClock()
    generator = TimedGenerator(clock, 0.05, 1, overhead=3.0)
    service = model_py.TextGenerator(tiny_model[1], generator, config, clock=clock)
    assert service.config.budget_s == 45
    return service, generator


def test_a_calls_fixed_cost_is_not_counted_per_position(opt_like: tuple[Any, TimedGenerator]) -> None:
    service, generator = opt_like
    cost = service.calibrate()
    assert cost.overhead_s == pytest.approx(3.0) and cost.per_position_s == pytest.approx(0.05)
    [short] = service.run([{"text": ["Hi"], "seq_length": 16}])  # 3.8 s
    assert isinstance(short, dict)
    # Counted per position, that call's 3.8 s / 16 would put 512 positions at 122 s and refuse them;
    # they take 3 + 25.6 = 28.6 s.
    generator.passes.clear()
    started = service.clock()
    [long] = service.run([{"text": ["Hi"], "seq_length": 512}])
    assert isinstance(long, dict), long
    assert generator.passes == [(1, 512)]
    assert service.clock() - started == pytest.approx(28.6)


def test_a_slower_host_scales_every_estimate(opt_like: tuple[Any, TimedGenerator], model_py: ModuleType) -> None:
    service, generator = opt_like
    service.calibrate()
    generator.overhead, generator.rate = 6.0, 0.1  # the host is now twice as slow: 512 positions take 57.2 s
    [short] = service.run([{"text": ["Hi"], "seq_length": 16}])
    assert isinstance(short, dict)
    [refused] = service.run([{"text": ["Hi"], "seq_length": 512}])
    assert isinstance(refused, model_py.RequestError) and refused.code == 413 and "about 57 s" in str(refused)
    [fits] = service.run([{"text": ["Hi"], "seq_length": 300}])  # 36 s
    assert isinstance(fits, dict)
    generator.overhead, generator.rate = 3.0, 0.05  # and as fast again: the next call brings the estimate back
    service.run([{"text": ["Hi"], "seq_length": 16}])
    assert isinstance(service.run([{"text": ["Hi"], "seq_length": 512}])[0], dict)


def test_two_calls_fit_a_line_that_is_never_below_zero(model_py: ModuleType) -> None:
    cost = model_py.PassCost.fit((64, 10.0), (8, 2.0))
    assert (cost.overhead_s, cost.per_position_s) == (pytest.approx(0.857142857), pytest.approx(1 / 7))
    faster_long = model_py.PassCost.fit((8, 5.0), (64, 4.0))  # noise: the longer call was quicker
    assert (faster_long.overhead_s, faster_long.per_position_s) == (4.0, 0.0)
    assert model_py.PassCost.fit((8, 1.0), (8, 1.0)).per_position_s == 0.125


def test_a_request_that_alone_would_outlive_the_predict_timeout_is_refused(
    timed: tuple[Any, TimedGenerator], model_py: ModuleType
) -> None:
    service, generator = timed
    service.calibrate()
    generator.passes.clear()
    # 12 prompts: 6 passes of 20 positions, 60 s > 54 s; 10 prompts fit (50 s).
    [refused] = service.run([{"text": ["Hi"] * 12, "seq_length": 20}])
    assert isinstance(refused, model_py.RequestError) and refused.code == 413
    for part in ("about 60 s", "predict_timeout=60 s", "at most 10 prompts"):
        assert part in str(refused)
    assert generator.passes == []
    started = service.clock()
    [ok] = service.run([{"text": ["Hi"] * 10, "seq_length": 20}])
    assert isinstance(ok, dict) and len(ok["outputs"]) == 10
    assert service.clock() - started == 50


def test_a_batch_stops_before_a_pass_that_would_outlive_the_predict_timeout(
    timed: tuple[Any, TimedGenerator], model_py: ModuleType
) -> None:
    service, generator = timed  # not calibrated: the first pass's own time is the estimate
    body = {"text": ["Hi"] * 8, "seq_length": 20}
    first, second, third = service.run([body, body, body])
    assert isinstance(first, dict) and len(first["outputs"]) == 8
    for late in (second, third):
        assert isinstance(late, model_py.RequestError) and late.code == 503 and "send it again" in str(late)
    assert service.clock() <= service.config.budget_s  # 5 passes of 10 s: a sixth would end at 60 s
    assert len(generator.passes) == 5


def test_the_predict_timeout_comes_from_the_properties_then_the_image(
    model_py: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PREDICT_TIMEOUT", raising=False)
    assert model_py.ServerConfig.from_properties({"model_id": "m"}).predict_timeout_s == 120  # DJL's default
    monkeypatch.setenv("PREDICT_TIMEOUT", "240")  # the LMI neuronx image's
    assert model_py.ServerConfig.from_properties({"model_id": "m"}).predict_timeout_s == 240
    props = {"model_id": "m", "predict_timeout": "600"}
    assert model_py.ServerConfig.from_properties(props).predict_timeout_s == 600
    with pytest.raises(model_py.SettingsError, match=r"option\.predict_timeout='soon'"):
        model_py.ServerConfig.from_properties({"model_id": "m", "predict_timeout": "soon"})


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"model_id": "m", "dtype": "int8"}, "option.dtype='int8'"),
        ({"model_id": "m", "n_positions": "many"}, "option.n_positions='many'"),
        ({"model_id": "m", "batch_size": "0"}, "option.batch_size='0'"),
        ({}, "option.model_id"),
    ],
)
def test_bad_properties_fail_the_load(model_py: ModuleType, props: dict[str, str], named: str) -> None:
    with pytest.raises(model_py.SettingsError, match=named.replace(".", r"\.").replace("(", r"\(")):
        model_py.ServerConfig.from_properties(props)


def test_a_bundled_model_folder_is_found_in_the_model_dir(model_py: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    bundled = model_py.ServerConfig.from_properties({"model_id": "model", "model_dir": str(tmp_path)})
    assert bundled.model_source == str(tmp_path / "model")
    hub = model_py.ServerConfig.from_properties({"model_id": "facebook/opt-13b", "model_dir": str(tmp_path)})
    assert hub.model_source == "facebook/opt-13b"


@pytest.fixture
def served(model_py: ModuleType, service: Any, djl_python: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """handle() with the Neuron load replaced by the CPU service; records each load."""
    loads: list[Any] = []

    def load_on_cpu(config: Any) -> Any:
        loads.append(config)
        return service

    monkeypatch.setattr(model_py, "load_neuron", load_on_cpu)
    monkeypatch.setattr(model_py, "_service", None)
    return loads


def serving_properties(model_dir: Path, **options: str) -> dict[str, str]:
    """A bundle's serving.properties, as DJL reads them from the model folder."""
    props = {"engine": "Python", "batch_size": "4", "max_batch_delay": "100", "option.entryPoint": "model.py",
             "option.model_id": str(model_dir), "option.n_positions": "64",
             "option.predict_timeout": "240"}  # fmt: skip
    return {**props, **{f"option.{k}": v for k, v in options.items()}}


def test_handle_loads_on_the_warm_up_call_and_answers_requests(
    model_py: ModuleType, djl_python: ModuleType, served: list[Any], tiny_model_dir: Path
) -> None:
    warm_up = djl_python.load(model_py.handle, serving_properties(tiny_model_dir), str(tiny_model_dir))
    assert warm_up.code == 204  # the handler's None
    assert len(served) == 1 and served[0].n_positions == 64 and served[0].predict_timeout_s == 240
    assert served[0].model_dir == str(tiny_model_dir)  # from the engine's model_dir property
    [response] = djl_python.predict(model_py.handle, [{"text": ["Hello"], "seq_length": 12}], str(tiny_model_dir))
    assert response.status == 200 and response.headers == {"content-type": "application/json"}
    assert len(response.json()["outputs"]) == 1 and response.json()["outputs"][0].startswith("Hello")
    assert len(served) == 1  # loaded once


def test_a_warm_up_that_fails_fails_the_model_load(
    model_py: ModuleType, djl_python: ModuleType, served: list[Any], tmp_path: Path
) -> None:
    with pytest.raises(djl_python.ModelLoadError) as failed:
        djl_python.load(model_py.handle, serving_properties(tmp_path, dtype="int8"), str(tmp_path))
    assert "option.dtype='int8' is invalid" in failed.value.output.json()["error"]
    assert served == []


@pytest.mark.parametrize(("raw", "named"), [(b"{not json", "not valid UTF-8 JSON"), (b'{"text": 5}', "text=5")])
def test_handle_answers_bad_requests_with_400(
    model_py: ModuleType, djl_python: ModuleType, served: list[Any], raw: bytes, named: str, tmp_path: Path
) -> None:
    # A model folder (the load is stubbed): a hub model id would need its commit and files' sha256.
    djl_python.load(model_py.handle, serving_properties(tmp_path), str(tmp_path))
    [response] = djl_python.predict(model_py.handle, [djl_python.Input.request(raw)], str(tmp_path))
    assert response.status == 400
    assert response.headers["content-type"] == "application/json"
    assert named in response.json()["error"] and response.json()["message"] == "Bad Request"


def test_a_djl_batch_answers_each_request_in_its_body(
    model_py: ModuleType, djl_python: ModuleType, served: list[Any], tmp_path: Path
) -> None:
    # DJL 0.29.0's static batching gives each request the batch's status and headers (fake_djl.predict
    # follows PyPredictor.batchPredict): a refused request of a batch reads its refusal in its body.
    djl_python.load(model_py.handle, serving_properties(tmp_path), str(tmp_path))
    good, bad, pair = djl_python.predict(
        model_py.handle, [{"text": "Hello", "max_new_tokens": 3}, {"text": 7}, {"text": ["a", "b"]}], str(tmp_path)
    )
    assert [r.status for r in (good, bad, pair)] == [200, 200, 200]
    assert len(good.json()["outputs"]) == 1 and len(pair.json()["outputs"]) == 2
    assert bad.json()["code"] == 400 and "text=7" in bad.json()["error"] and "outputs" not in bad.json()
    # No batch_<i>_* properties: static batching would send every one of them as a header of every response.
    assert good.headers == bad.headers == {"content-type": "application/json"}


def test_an_altered_bundle_is_refused(model_py: ModuleType, tiny_artifacts: Path, tmp_path: Path) -> None:
    with tarfile.open(tiny_artifacts / "inf2" / "bundle.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    model_py.verify_bundle(tmp_path)
    with open(tmp_path / "serving.properties", "a") as f:
        f.write("option.tensor_parallel_degree=2\n")
    with pytest.raises(model_py.SettingsError, match=r"serving\.properties does not match"):
        model_py.verify_bundle(tmp_path)
    (tmp_path / "serving.properties").unlink()
    with pytest.raises(model_py.SettingsError, match="missing"):
        model_py.verify_bundle(tmp_path)
