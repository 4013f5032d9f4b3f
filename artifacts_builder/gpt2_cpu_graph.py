"""The graph ONNX Runtime serves on a CPU: GPT-2 with its KV cache updated in place.

The export that TensorRT takes (`artifacts_builder.gpt2.export_onnx`) concatenates each step's
keys and values onto a copy of the whole past: at 16 rows that copy was 15% of a decode step on
ONNX Runtime. Here each layer's attention is ONNX Runtime's ``GroupQueryAttention`` (with as
many key/value heads as query heads, i.e. plain multi-head attention), which writes the new
keys and values into a buffer and attends over each row's own length. The
server binds one buffer per layer as both the past input and the present output, so nothing is
copied (`serving.gpt2.backends.SharedKVStep`).

Rows are right-padded: ``seqlens_k`` holds each row's last filled position (its length - 1),
``total_sequence_length`` the longest row's length. A prompt is one call with the whole
prompt; after it, one token a step.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

#: GroupQueryAttention's CPU kernel takes head sizes that are multiples of this.
HEAD_SIZE_MULTIPLE = 8


def trace_to_onnx(
    module: Any, sample: tuple[Any, ...], path: Path, *, inputs: list[str], outputs: list[str],
    axes: dict[str, dict[int, str]], opset: int,
) -> None:  # fmt: skip
    """The TorchScript exporter: the one that takes an autograd function's ``symbolic``."""
    import torch

    with warnings.catch_warnings(), torch.no_grad():
        # The tracer warns about every Python branch on shapes; the parity gate checks the result.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module.eval(),
            sample,
            str(path),
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=axes,
            opset_version=opset,
            dynamo=False,
        )


def _attention_op() -> Any:
    import torch

    class GroupQueryAttention(torch.autograd.Function):
        """Exported as ``com.microsoft::GroupQueryAttention``. Tracing needs only the shapes, so
        the Python side returns placeholders: the parity gate checks the graph ONNX Runtime
        runs against PyTorch's own model."""

        @staticmethod
        def forward(
            ctx: Any,
            query: torch.Tensor,
            key: torch.Tensor,
            value: torch.Tensor,
            past_key: torch.Tensor,
            past_value: torch.Tensor,
            seqlens_k: torch.Tensor,
            total_sequence_length: torch.Tensor,
            num_heads: int,
            scale: float,
        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            return query.clone(), past_key.clone(), past_value.clone()

        @staticmethod
        def symbolic(
            g: Any,
            query: Any,
            key: Any,
            value: Any,
            past_key: Any,
            past_value: Any,
            seqlens_k: Any,
            total_sequence_length: Any,
            num_heads: int,
            scale: float,
        ) -> Any:
            outputs = g.op(
                "com.microsoft::GroupQueryAttention",
                query,
                key,
                value,
                past_key,
                past_value,
                seqlens_k,
                total_sequence_length,
                num_heads_i=num_heads,
                kv_num_heads_i=num_heads,
                scale_f=scale,
                outputs=3,
            )
            for out, like in zip(outputs, (query, past_key, past_value), strict=True):
                out.setType(like.type())
            return outputs

    return GroupQueryAttention


def export_shared_kv(model: Any, info: Any, path: Path, *, opset: int) -> None:
    """Export `model` (a `GPT2LMHeadModel`, fp32) as the CPU step graph described above."""
    import torch

    from serving.gpt2.generation import output_names, shared_kv_input_names

    config = model.config
    n_layer, n_head, head_dim, width = info.n_layer, info.n_head, info.head_dim, config.n_embd
    if head_dim % HEAD_SIZE_MULTIPLE:
        raise ValueError(
            f"head size {head_dim} (n_embd {width} / n_head {n_head}) is not a multiple of {HEAD_SIZE_MULTIPLE}, "
            "which ONNX Runtime's GroupQueryAttention needs: use a GPT-2 configuration whose n_embd / n_head is one"
        )
    scales = []
    for layer in range(n_layer):
        scale = head_dim**-0.5 if config.scale_attn_weights else 1.0
        if config.scale_attn_by_inverse_layer_idx:
            scale /= layer + 1
        scales.append(float(scale))
    attention = _attention_op()

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(
            self,
            input_ids: torch.Tensor,
            position_ids: torch.Tensor,
            seqlens_k: torch.Tensor,
            total_sequence_length: torch.Tensor,
            *past: torch.Tensor,
        ) -> tuple[torch.Tensor, ...]:
            body = self.model.transformer
            x = body.wte(input_ids) + body.wpe(position_ids)
            sequence = input_ids.shape[1]
            # GroupQueryAttention leaves the outputs of a prompt's padding positions undefined
            # (they may be NaN); zero them so that no later operator sees them, least of all a
            # dynamic quantizer whose one scale spans the whole tensor.
            filled = (torch.arange(sequence)[None, :] <= seqlens_k[:, None].long()).unsqueeze(-1)
            present = []
            for i, block in enumerate(body.h):
                query, key, value = block.attn.c_attn(block.ln_1(x)).split(width, dim=2)
                out, new_key, new_value = attention.apply(
                    query, key, value, past[2 * i], past[2 * i + 1], seqlens_k, total_sequence_length, n_head, scales[i]
                )
                x = x + block.attn.c_proj(torch.where(filled, out, torch.zeros_like(out)))
                x = x + block.mlp(block.ln_2(x))
                present += [new_key, new_value]
            x = body.ln_f(x)
            # Each row's last filled position: its length - 1 in a prompt, 0 in a one-token step.
            last = torch.minimum(seqlens_k.long(), torch.tensor(sequence - 1))
            logits = self.model.lm_head(x[torch.arange(x.shape[0]), last]).float()
            return (logits, *present)

    batch, sequence, capacity = 2, 3, 8
    sample = (
        torch.ones((batch, sequence), dtype=torch.int64),
        torch.arange(sequence).expand(batch, sequence).contiguous(),
        torch.full((batch,), sequence - 1, dtype=torch.int32),
        torch.tensor(sequence, dtype=torch.int32),
        *[torch.zeros((batch, n_head, capacity, head_dim)) for _ in range(2 * n_layer)],
    )
    inputs, outputs = shared_kv_input_names(n_layer), output_names(n_layer)
    axes: dict[str, dict[int, str]] = {
        "input_ids": {0: "batch", 1: "sequence"},
        "position_ids": {0: "batch", 1: "sequence"},
        "seqlens_k": {0: "batch"},
        "logits": {0: "batch"},
    }
    axes.update({name: {0: "batch", 2: "capacity"} for name in inputs[4:] + outputs[1:]})
    trace_to_onnx(Step(), sample, path, inputs=inputs, outputs=outputs, axes=axes, opset=opset)
