"""Where SageMaker places an inference component's copies, and what a container sees of its
instance.

A copy takes what its ``ComputeResourceRequirements`` ask for (``NumberOfAcceleratorDevicesRequired``,
``NumberOfCpuCoresRequired``, ``MinMemoryRequiredInMb``) on one instance of the endpoint's variant,
and is placed only on an instance where all of it is free. With no room left, SageMaker adds an
instance when the variant's ``ManagedInstanceScaling`` is ``ENABLED`` and below its
``MaxInstanceCount``; otherwise the copy waits (SageMaker Developer Guide, "Autoscaling an
inference component" / "Set auto scaling policies for inference component endpoints": "If the
endpoint doesn't have enough capacity to place the copies, the inference component copies remain
pending until capacity becomes available"), and an instance left without copies is removed down
to ``MinInstanceCount``.

A container sees its accelerators as the NVIDIA container runtime shows them:
``NVIDIA_VISIBLE_DEVICES`` and ``CUDA_VISIBLE_DEVICES`` list the indices of the devices given to it
(a real-time variant's container all of its instance type's GPUs; a copy those placed for it).
The instance types' GPUs, vCPUs and memory are the project's facts (llm_contracts/instances.py).

A :class:`Fleet` is one endpoint variant's instances; it is kept in the account's hosting backend
(local_aws/sagemaker/runtime.py), never in this module.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_contracts import instances


@dataclass(frozen=True)
class Need:
    """What one copy asks for (its ComputeResourceRequirements)."""

    accelerators: int = 0
    cores: float = 0.0
    memory_mb: int = 0

    @classmethod
    def of(cls, requirements: Mapping[str, Any] | None) -> Need:
        found = requirements or {}
        return cls(
            accelerators=int(found.get("NumberOfAcceleratorDevicesRequired") or 0),
            cores=float(found.get("NumberOfCpuCoresRequired") or 0),
            memory_mb=int(found.get("MinMemoryRequiredInMb") or 0),
        )


@dataclass(frozen=True)
class Size:
    """An instance type's accelerators (GPUs), vCPUs and memory."""

    accelerators: int
    cores: int
    memory_mb: int

    @classmethod
    def of(cls, instance_type: str) -> Size:
        cpus, memory_gib = instances.host(instance_type) or (0, 0)
        return cls(instances.gpus(instance_type), cpus, memory_gib * 1024)


@dataclass(frozen=True)
class Slot:
    """A placed copy: its instance (by number) and the devices and cores given to it."""

    instance: int
    devices: tuple[int, ...]
    cores: tuple[int, ...]
    memory_mb: int

    def environment(self) -> dict[str, str]:
        return visible_devices(self.devices)

    def host_cpus(self) -> tuple[int, ...]:
        """The CPUs of this host its container is bound to: its cores, each taken onto the CPUs
        this process may use (an instance's 48 vCPUs onto this host's few)."""
        allowed = sorted(os.sched_getaffinity(0))
        return tuple(sorted({allowed[core % len(allowed)] for core in self.cores}))


def visible_devices(devices: tuple[int, ...] | range) -> dict[str, str]:
    """The variables the NVIDIA container runtime sets for a container given `devices` (its
    ``NVIDIA_VISIBLE_DEVICES``; ``CUDA_VISIBLE_DEVICES`` as the devices' order inside it)."""
    listed = ",".join(str(d) for d in devices)
    return {"NVIDIA_VISIBLE_DEVICES": listed or "void", "CUDA_VISIBLE_DEVICES": listed}


@dataclass
class _Instance:
    number: int
    free_devices: list[int]
    free_cores: list[int]
    free_memory_mb: int
    copies: int = 0

    def fits(self, need: Need) -> bool:
        return (
            len(self.free_devices) >= need.accelerators
            and len(self.free_cores) >= math.ceil(need.cores)
            and self.free_memory_mb >= need.memory_mb
        )


@dataclass
class Fleet:
    """One endpoint variant's instances and the copies placed on them."""

    instance_type: str
    size: Size
    initial: int
    min_instances: int
    max_instances: int
    _instances: list[_Instance] = field(default_factory=list)
    _next: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, variant: Mapping[str, Any]) -> Fleet:
        """The fleet of a production variant (of an endpoint config) that holds components."""
        instance_type = str(variant.get("InstanceType") or "")
        initial = int(variant.get("InitialInstanceCount") or 0)
        managed = variant.get("ManagedInstanceScaling") or {}
        if managed.get("Status") == "ENABLED":
            low = int(managed.get("MinInstanceCount") or 0)
            high = int(managed.get("MaxInstanceCount") or max(initial, 1))
        else:
            low = high = initial
        fleet = cls(instance_type, Size.of(instance_type), initial, low, high)
        for _ in range(initial):
            fleet._add()
        return fleet

    def _add(self) -> _Instance:
        found = _Instance(
            self._next,
            list(range(self.size.accelerators)),
            list(range(self.size.cores)),
            self.size.memory_mb,
        )
        self._next += 1
        self._instances.append(found)
        return found

    @property
    def instance_count(self) -> int:
        with self._lock:
            return len(self._instances)

    def never_fits(self, need: Need) -> str | None:
        """Why no instance of the type could ever hold a copy asking for `need`, else None."""
        for asked, has, what in (
            (need.accelerators, self.size.accelerators, "accelerator devices"),
            (math.ceil(need.cores), self.size.cores, "CPU cores"),
            (need.memory_mb, self.size.memory_mb, "MB of memory"),
        ):
            if asked > has:
                return f"a copy asks for {asked} {what}, and an {self.instance_type} instance has {has}"
        return None

    def place(self, need: Need) -> Slot | None:
        """A slot for a copy on the first instance with room for all of `need`, on a new
        instance when none has room and managed instance scaling allows one more; None when the
        copy must wait (or could never be placed: :meth:`never_fits`)."""
        if self.never_fits(need) is not None:
            return None
        with self._lock:
            room = next((i for i in self._instances if i.fits(need)), None)
            if room is None:
                if len(self._instances) >= self.max_instances:
                    return None
                room = self._add()
            devices = tuple(room.free_devices[: need.accelerators])
            cores = tuple(room.free_cores[: math.ceil(need.cores)])
            del room.free_devices[: need.accelerators]
            del room.free_cores[: math.ceil(need.cores)]
            room.free_memory_mb -= need.memory_mb
            room.copies += 1
            return Slot(room.number, devices, cores, need.memory_mb)

    def release(self, slot: Slot) -> None:
        """The slot's resources free again; an instance left empty is removed while the fleet has
        more than its minimum (managed instance scaling's scale-in)."""
        with self._lock:
            found = next((i for i in self._instances if i.number == slot.instance), None)
            if found is None:
                return
            found.free_devices = sorted(found.free_devices + list(slot.devices))
            found.free_cores = sorted(found.free_cores + list(slot.cores))
            found.free_memory_mb += slot.memory_mb
            found.copies -= 1
            if found.copies == 0 and len(self._instances) > self.min_instances:
                self._instances.remove(found)
