"""A faithful stand-in for the parts of DJL Serving's `djl_python` that model.py uses.

No `djl_python` distribution installs from PyPI (the package ships inside the DJL
container), so this mirrors `djl_python/inputs.py` and `outputs.py` of DJL Serving 0.29:
the same batch property and key layout (`batch_size`, `batch_NNN_<key>`), the same
`get_as_json` decoding and the same `Output.error` body.
"""

from __future__ import annotations

import json
from typing import Any


class Input:
    def __init__(self, properties: dict[str, str] | None = None, content: list[tuple[str, bytes]] | None = None):
        self.properties = dict(properties or {})
        self.content = list(content or [])

    @classmethod
    def request(cls, body: Any, **properties: str) -> Input:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return cls({"Content-Type": "application/json", **properties}, [("data", raw)])

    @classmethod
    def batch(cls, bodies: list[Any]) -> Input:
        """What DJL's server batching hands the handler: one Input, keys prefixed per request."""
        merged = cls({"batch_size": str(len(bodies))})
        for i, body in enumerate(bodies):
            merged.properties[f"batch_{i:03d}_Content-Type"] = "application/json"
            merged.content.append((f"batch_{i:03d}_data", json.dumps(body).encode()))
        return merged

    def is_batch(self) -> bool:
        return "batch_size" in self.properties

    def get_batch_size(self) -> int:
        return int(self.properties.get("batch_size", "1"))

    def get_batches(self) -> list[Input]:
        if not self.is_batch():
            return [self]
        batch = [Input() for _ in range(self.get_batch_size())]
        for key, value in self.properties.items():
            if key.startswith("batch_") and key != "batch_size":
                batch[int(key[6:9])].properties[key[10:]] = value
        for key, value in self.content:
            batch[int(key[6:9])].content.append((key[10:], value))
        return batch

    def get_properties(self) -> dict[str, str]:
        return self.properties

    def is_empty(self) -> bool:
        return not self.content

    def get_as_bytes(self, key: str | None = None) -> bytes | None:
        if not self.content:
            return None
        values = dict(self.content)
        if key:
            if key not in values:
                raise KeyError(f"requested data for key:{key} is not found!")
            return values[key]
        return values.get("data", self.content[0][1])

    def get_as_json(self, key: str | None = None) -> Any:
        return json.loads(self.get_as_bytes(key=key).decode("utf-8"))  # type: ignore[union-attr]


class Output:
    def __init__(self, code: int = 200, message: str = "OK") -> None:
        self.code = code
        self.message = message
        self.properties: dict[str, str] = {}
        self.content: list[tuple[str | None, bytes]] = []

    def error(self, error: str, code: int = 424, message: str = "prediction failure") -> Output:
        self.code = code
        self.message = message
        self.add_property("content-type", "application/json")
        self.add_as_json({"code": self.code, "message": self.message, "error": error})
        return self

    def add_property(self, key: str, val: str) -> Output:
        self.properties[key] = val
        return self

    def add_as_json(self, val: Any, key: str | None = None, batch_index: int | None = None) -> Output:
        if batch_index is not None:
            key = f"batch_{batch_index}.{'' if key is None else key}"
        encoded = json.dumps(val, ensure_ascii=False, allow_nan=False, indent=2, separators=(",", ":"))
        self.content.append((key, encoded.encode("utf-8")))
        return self

    def json(self, index: int = 0) -> Any:
        return json.loads(self.content[index][1])
