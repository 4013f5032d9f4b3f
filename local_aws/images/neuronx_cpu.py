"""A CPU stand-in for the two parts of transformers-neuronx that the inf2 handler
(serving/inf2/model.py) calls, with the signatures of transformers-neuronx 0.11.351 (the LMI
neuronx 0.29.0 image's): ``transformers_neuronx.module.save_pretrained_split`` and
``transformers_neuronx.opt.model.OPTForSampling`` (``from_pretrained``, ``to_neuron``, ``save``,
``load``, ``sample``).

Neuron's graphs need NeuronCores, so ``sample`` runs the image's transformers on the CPU
(``generate``, greedy for ``top_k=1``), honouring what the compiled graphs impose: exactly
``batch_size`` rows, left padding marked by ``start_ids``. ``to_neuron`` compiles nothing and
``save`` writes a placeholder graph file, so the handler's split and graph caches are exercised
as on Neuron. The local LMI container (local_aws/images/lmi_entrypoint.py) and the inf2 tests
(tests/inf2/lmi_driver.py) install it; torch and transformers are imported inside
:func:`install`, which runs under the image's pinned environment (``.venv-lmi``).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

#: What a placeholder compiled graph holds.
PLACEHOLDER_GRAPH = b"compiled on the CPU stand-in: no Neuron graph\n"


def install(calls: list[dict[str, Any]]) -> None:
    """Register the stand-in as ``transformers_neuronx`` in ``sys.modules``; every call of it
    is appended to `calls` (the tests read them)."""
    import torch
    from transformers import OPTForCausalLM

    def save_pretrained_split(model: Any, folder: str) -> None:
        dtypes = sorted({str(p.dtype) for p in model.parameters()})
        calls.append({"call": "save_pretrained_split", "dtypes": dtypes})
        model.save_pretrained(folder)

    class OPTForSampling:
        def __init__(self, model: Any, batch_size: int) -> None:
            self.model = model
            self.batch_size = batch_size

        @classmethod
        def from_pretrained(cls, path: str, **options: Any) -> OPTForSampling:
            calls.append({"call": "from_pretrained", **options})
            model = OPTForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
            model.eval()  # type: ignore[no-untyped-call]
            return cls(model, options["batch_size"])

        def to_neuron(self) -> None:
            calls.append({"call": "to_neuron"})

        def save(self, folder: str) -> None:
            Path(folder, "graphs.neff").write_bytes(PLACEHOLDER_GRAPH)

        def load(self, folder: str) -> None:
            calls.append({"call": "load"})

        def sample(self, input_ids: Any, sequence_length: int, start_ids: Any = None, top_k: int = 50) -> Any:
            rows, width = input_ids.shape
            calls.append({"call": "sample", "rows": rows, "sequence_length": sequence_length, "top_k": top_k})
            if rows != self.batch_size:
                raise ValueError(f"the compiled batch is {self.batch_size} rows, got {rows}")
            mask = (torch.arange(width)[None, :] >= start_ids[:, None]).long()
            eos = self.model.config.eos_token_id
            with torch.inference_mode():
                return self.model.generate(input_ids, attention_mask=mask, max_new_tokens=sequence_length - width,
                                           do_sample=top_k > 1, top_k=top_k, pad_token_id=eos,
                                           eos_token_id=eos)  # fmt: skip

    package = types.ModuleType("transformers_neuronx")
    package.__path__ = []
    module = types.ModuleType("transformers_neuronx.module")
    module.save_pretrained_split = save_pretrained_split  # type: ignore[attr-defined]
    opt = types.ModuleType("transformers_neuronx.opt")
    opt.__path__ = []
    opt_model = types.ModuleType("transformers_neuronx.opt.model")
    opt_model.OPTForSampling = OPTForSampling  # type: ignore[attr-defined]
    sys.modules.update({"transformers_neuronx": package, "transformers_neuronx.module": module,
                        "transformers_neuronx.opt": opt, "transformers_neuronx.opt.model": opt_model})  # fmt: skip
