"""A local SageMaker hosting runtime: the local AWS's endpoints run their model's container.

What SageMaker does, done on this host with the image's own server code (local_aws/sagemaker/containers.py):

* an endpoint being created gets one container per instance of each production variant (its
  initial instance count; an inference component one per copy): the model data from the
  local S3 laid out as ``/opt/ml/model`` would be (a ``model.tar.gz`` extracted; an
  uncompressed S3 prefix copied with its keys as paths), the Model's environment, a free port
  as ``SAGEMAKER_BIND_TO_PORT``. It is ``InService`` once every container answers ``/ping``
  with 200 within the variant's ``ContainerStartupHealthCheckTimeoutInSeconds``; a container
  that exits or never does fails the endpoint (``Failed``, with the reason);
* an update starts the new config's containers beside the old ones and switches once they
  answer ``/ping``; until then the old ones keep answering (a new config that fails leaves the
  endpoint on the old one, ``InService``, with the failure reason);
* ``InvokeEndpoint`` is forwarded to the least busy of the variant's containers (``local_aws.patches``);
* a new instance count (:meth:`Hosting.scale`) starts or stops containers until it is reached,
  the endpoint ``Updating`` meanwhile; at zero, an invocation finds :class:`NoCapacity`;
* a container whose process has exited after the endpoint went ``InService`` (a crashed server)
  answers no more: the next invocation finds it (:class:`Unhealthy`), ends what is left of its
  processes, and gets the ``ModelError`` SageMaker gives when it gets no answer from the
  endpoint. SageMaker's periodic ``/ping`` would also replace the instance; here the variant
  stays down until the endpoint is updated or deleted (docs/LOCAL_AWS.md);
* deleting the endpoint, or stopping the local AWS, stops its containers.

The endpoints (and inference components) are kept as moto keeps a service's resources, in a
backend per account and region (:data:`hosting_backends`), which moto's reset drops with its
own; :func:`hosting_plane` runs them for every account and region, keyed by (account, region, name).

Which local server runs a model is read from the model, as llm_contracts/engines.py says a model
names its engine (its ``SM_VLLM_*`` or toolkit variables, else its image's repository): the Hugging
Face toolkit's model server under ``.venv-hf``, or AWS's vLLM image's entrypoint and vLLM server
under ``.venv-vllm`` (the CPU build of the image's vLLM version), whatever image URI the model
names; DJL Serving's LMI neuronx image runs the bundle's handler behind a stand-in for DJL's front
end under ``.venv-lmi`` (local_aws/sagemaker/lmi_container.py); any other model is taken for this project's
GPT-2 image (the only image it builds; the local AWS cannot pull images), run from ``serving/gpt2``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import random
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moto.core.base_backend import BackendDict, BaseBackend, backend_lock

from llm_contracts.engines import engine_of_model
from local_aws.host import HOST
from local_aws.sagemaker.containers import Container, ContainerError, Gpt2Container, HuggingFaceContainer, VllmContainer
from local_aws.sagemaker.lmi_container import LmiContainer, is_lmi_neuronx
from local_aws.sagemaker.logs import ContainerLog, LogTarget, instance_id
from local_aws.sagemaker.placement import Fleet, Need, Slot, visible_devices

log = logging.getLogger("local_aws.sagemaker.runtime")

#: SageMaker's default when a variant sets no ContainerStartupHealthCheckTimeoutInSeconds.
DEFAULT_STARTUP_TIMEOUT_S = 600
#: SageMaker's limit on one invocation.
INVOCATION_TIMEOUT_S = 60
#: The local server of each engine a model may name (llm_contracts/engines.py).
ENGINE_CONTAINERS: dict[str, type[Container]] = {"vllm": VllmContainer, "hf-toolkit": HuggingFaceContainer}


class Unroutable(Exception):
    """An invocation the runtime cannot hand to a container, for a reason SageMaker answers
    (local_aws/sagemaker/errors.py ``unroutable``): a ValidationError with this message, unless
    a subclass says otherwise. Any other exception on the way is the local AWS's own fault
    (InternalFailure), never the caller's."""


class EndpointNotFound(Unroutable):
    pass


class NotInService(Unroutable):
    pass


class VariantNotFound(Unroutable):
    """An invocation names a production variant the endpoint does not have."""


class RefusedInvocation(Unroutable):
    """An invocation SageMaker refuses for what it asks of the endpoint: a real-time call to an
    asynchronous endpoint, a target model or container it does not have, a component it lacks."""


class Unhealthy(Unroutable):
    """The variant's container exited after the endpoint went InService: nothing answers."""

    def __init__(self, variant: str, code: int | None) -> None:
        super().__init__(f"the container of variant {variant} exited (code {code})")
        self.variant = variant


def container_for(image: str, model_data: Callable[[Path], None], environment: Mapping[str, str]) -> Container:
    """The local server of the model's engine, read from the model (its environment, else its
    image's repository: llm_contracts/engines.py), or of the LMI neuronx image; any other model is
    taken for this project's GPT-2 image (see the module's docstring)."""
    kind = ENGINE_CONTAINERS.get(engine_of_model(image, environment) or "", Gpt2Container)
    if kind is Gpt2Container and is_lmi_neuronx(image):
        kind = LmiContainer
    return kind(model_data, environment=environment)


class NoRoom(RuntimeError):
    """No instance of the endpoint has room for one more copy, and managed instance scaling
    allows no more instances: the copy waits (local_aws/sagemaker/placement.py)."""

    def __init__(self, variant: str) -> None:
        super().__init__(f"no instance has room for another copy of {variant}")


class NoCapacity(Unroutable):
    """The variant has no instance (a component no copy) running: scaled to zero."""

    def __init__(self, variant: str) -> None:
        super().__init__(f"variant {variant} has no instance running")
        self.variant = variant


@dataclass
class Deployment:
    """One endpoint config's containers (a component's model's): per variant its instances (its
    copies), each a container started from the variant's spec, as many as its desired count."""

    config_name: str
    specs: dict[str, VariantSpec] = field(default_factory=dict)
    fetch: ModelFetcher | None = None
    launcher: Launcher | None = None
    #: The compile caches its containers share with the others of this local AWS (Container).
    compile_cache: Path | None = None
    #: Per variant, the instances that answered /ping, in the order they came up.
    instances: dict[str, list[Container]] = field(default_factory=dict)
    #: Per variant, how many instances it should have (what scaling last set).
    desired: dict[str, int] = field(default_factory=dict)
    stopped: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: Containers started and not yet answering /ping, by variant (stopping the deployment stops
    #: them too).
    _starting: list[tuple[str, Container]] = field(default_factory=list)
    #: Invocations being answered: an endpoint that moved to another config lets them finish.
    _in_flight: int = 0
    #: Invocations being answered, per container (by id): the least busy gets the next one.
    _busy: dict[int, int] = field(default_factory=dict)
    #: The variants whose instances are being started or stopped to match their desired count.
    reconciling: set[str] = field(default_factory=set)
    _idle: threading.Condition = field(default_factory=threading.Condition)
    #: Where each copy (by its container's id) was placed, freed when it stops.
    _slots: dict[int, tuple[Fleet, Slot]] = field(default_factory=dict)
    #: Each running container's output shipper to CloudWatch Logs (by the container's id).
    _logs: dict[int, ContainerLog] = field(default_factory=dict)

    @property
    def containers(self) -> dict[str, Container]:
        """The first instance of each variant that has one, else the one it is starting."""
        with self._lock:
            starting = {variant: container for variant, container in reversed(self._starting)}
            return {**starting, **{variant: found[0] for variant, found in self.instances.items() if found}}

    def ready(self, variant: str) -> int:
        with self._lock:
            return len(self.instances.get(variant, []))

    def busy(self, variant: str) -> int:
        """Invocations in flight at the variant's instances."""
        with self._idle:
            return sum(self._busy.get(id(c), 0) for c in self.instances.get(variant, []))

    def begin(self, container: Container) -> None:
        with self._idle:
            self._in_flight += 1
            self._busy[id(container)] = self._busy.get(id(container), 0) + 1

    def end(self, container: Container) -> None:
        with self._idle:
            self._in_flight -= 1
            self._busy[id(container)] -= 1
            self._idle.notify_all()

    def drain(self, timeout_s: float, container: Container | None = None) -> None:
        """Until no invocation is in flight (at `container`, else at any of them)."""
        with self._idle:
            self._idle.wait_for(
                lambda: (self._busy.get(id(container), 0) if container else self._in_flight) == 0, timeout=timeout_s
            )

    def least_busy(self, variant: str) -> Container | None:
        """The instance of `variant` to send an invocation to: one of those with the fewest in
        flight, at random, among those whose process runs (SageMaker routes to healthy instances,
        at random or to the least busy: its RoutingConfig); None when every one has exited, or
        there is none."""
        with self._lock:
            alive = [c for c in self.instances.get(variant, []) if not c.exited()]
        with self._idle:
            fewest = min((self._busy.get(id(c), 0) for c in alive), default=None)
            least = [c for c in alive if self._busy.get(id(c), 0) == fewest]
        return random.choice(least) if least else None  # noqa: S311

    def start_instance(self, variant: str) -> tuple[Container, float]:
        """One more instance of `variant`, started and answering /ping; (it, seconds waited)."""
        spec = self.specs[variant]
        assert self.launcher is not None and self.fetch is not None
        environment = {**spec.environment, **visible_devices(range(spec.accelerators))}
        slot = None
        if spec.fleet is not None:
            slot = spec.fleet.place(spec.need)
            if slot is None:
                raise NoRoom(variant)
            environment = {**spec.environment, **slot.environment()}
        container = self.launcher(spec.image, _fetcher(self.fetch, spec.model_data), environment)
        container.compile_cache = self.compile_cache
        if slot is not None:
            container.cpus = slot.host_cpus() or None
            with self._lock:
                self._slots[id(container)] = (spec.fleet, slot)  # type: ignore[assignment]
        try:
            with self._lock:
                if self.stopped:
                    raise ContainerError("the endpoint was deleted while it was being created")
                self._starting.append((variant, container))
                container.start()
                if spec.logs is not None:
                    stream = spec.logs.stream_prefix + instance_id()
                    self._logs[id(container)] = ContainerLog(spec.logs, stream, container.log).start()
        except BaseException:
            self._release(container)
            raise
        try:
            waited = container.wait_ready(spec.startup_timeout_s)
            if spec.on_ready is not None:
                spec.on_ready(container)  # before it takes its first invocation
        except BaseException:
            self.stop_container(container)
            raise
        finally:
            with self._lock:
                self._starting.remove((variant, container))
        with self._lock:
            if not self.stopped:
                self.instances.setdefault(variant, []).append(container)
                return container, waited
        self.stop_container(container)
        raise ContainerError("the endpoint was deleted while its instance was starting")

    def _release(self, container: Container) -> None:
        """The container's copy's place on its instance freed."""
        with self._lock:
            placed = self._slots.pop(id(container), None)
        if placed is not None:
            placed[0].release(placed[1])

    def stop_instance(self, variant: str) -> bool:
        """The newest instance of `variant` out of the rotation, drained and stopped; False if it had none."""
        with self._lock:
            found = self.instances.get(variant, [])
            if not found:
                return False
            container = found.pop()
        self.drain(INVOCATION_TIMEOUT_S, container)
        self.stop_container(container)
        return True

    def stop_container(self, container: Container) -> None:
        """Stop `container`, free its copy's place, then stop its log shipper once it has shipped the
        container's last lines."""
        container.stop()
        self._release(container)
        with self._lock:
            shipper = self._logs.pop(id(container), None)
        if shipper is not None:
            shipper.stop()

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            containers = [c for found in self.instances.values() for c in found] + [c for _, c in self._starting]
        for container in containers:
            self.stop_container(container)


@dataclass
class HostedEndpoint:
    name: str
    status: str = "Creating"
    failure_reason: str | None = None
    live: Deployment | None = None
    #: The config being brought up; deleting the endpoint stops it too.
    pending: Deployment | None = None
    #: The share of invocations the pending config answers while an update shifts traffic.
    shifted: float = 0.0
    settled: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Rollout:
    """How an update moves traffic to the new config (the endpoint's DeploymentConfig):
    `steps` of (share of traffic on the new config, seconds of baking after the shift), while
    SageMaker watches `alarms`; `timeout_s` bounds the whole update."""

    steps: tuple[tuple[float, float], ...] = ((1.0, 0.0),)
    alarms: tuple[str, ...] = ()
    timeout_s: float | None = None


#: An update without a DeploymentConfig: blue/green, all traffic at once, no baking.
ALL_AT_ONCE = Rollout()
#: How often the alarms are read while an update bakes.
ALARM_POLL_S = 0.5
AlarmStates = Callable[[tuple[str, ...]], Mapping[str, str]]


#: What the runtime needs to know of an endpoint config: per variant, its name, its container
#: (Image, Environment, ModelDataUrl or ModelDataSource) and its startup timeout.
@dataclass(frozen=True)
class VariantSpec:
    variant: str
    image: str
    environment: Mapping[str, str]
    model_data: Mapping[str, Any]
    startup_timeout_s: int
    #: Why SageMaker could not get the image or the model data with the model's execution role
    #: (AWS's reason), else None.
    refused: str | None = None
    #: Instances (a component's copies) to start: the variant's initial instance count.
    count: int = 1
    #: A real-time variant's instance type's GPUs, all visible to its container.
    accelerators: int = 0
    #: A component's: the endpoint variant's instances its copies are placed on, and what each
    #: copy asks for (its ComputeResourceRequirements).
    fleet: Fleet | None = None
    need: Need = field(default_factory=Need)
    #: Where each container's output goes (local_aws/sagemaker/logs.py); None: nowhere.
    logs: LogTarget | None = None
    #: What SageMaker does to each new instance (copy) once it answers /ping and before it takes
    #: invocations: a base component's copy gets its adapters (local_aws/sagemaker/adapters.py).
    on_ready: Callable[[Container], None] | None = None


ModelFetcher = Callable[[Mapping[str, Any], Path], None]
Launcher = Callable[[str, Callable[[Path], None], Mapping[str, str]], Container]


class HostingBackend(BaseBackend):
    """An account's hosted endpoints and inference components in one region."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.endpoints: dict[str, HostedEndpoint] = {}
        #: The instances of each endpoint variant that holds components, by (endpoint, config,
        #: variant): where their copies are placed (local_aws/sagemaker/placement.py).
        self.fleets: dict[tuple[str, str, str], Fleet] = {}

    def reset(self) -> None:
        held = list(self.endpoints.values())
        super().reset()
        if held:
            # moto resets under the lock it creates backends under, which a container being
            # started can wait for (its model data is read through S3's backends) while its
            # deployment is locked: stopping it here could wait for ever. LocalAws stops every
            # endpoint before it resets moto; this is for moto's own reset (/moto-api/reset).
            threading.Thread(target=_stop_endpoints, args=(held,), name="reset-endpoints", daemon=True).start()


hosting_backends = BackendDict(HostingBackend, "sagemaker")


def _stop_endpoints(endpoints: list[HostedEndpoint]) -> None:
    for endpoint in endpoints:
        _stop_endpoint(endpoint)


def _stop_endpoint(endpoint: HostedEndpoint) -> None:
    # Stopping the containers still starting ends their wait for /ping at once.
    pending = endpoint.pending
    if pending is not None:
        pending.stop()
    endpoint.settled.wait(timeout=DEFAULT_STARTUP_TIMEOUT_S)
    if endpoint.live is not None:
        endpoint.live.stop()


def _held(key: tuple[str, str, str], *, create: bool = False) -> dict[str, HostedEndpoint]:
    """The endpoints of `key`'s account and region; a lookup alone creates no backend."""
    account, region, _ = key
    if create:
        return hosting_backends[account][region].endpoints
    regions = hosting_backends.get(account)
    backend = regions.get(region) if regions is not None else None
    return backend.endpoints if backend is not None else {}


class Hosting:
    """Runs the hosted endpoints of every account and region (kept in :data:`hosting_backends`),
    each by (account, region, name)."""

    def __init__(self, launcher: Launcher = container_for) -> None:
        #: Which local server runs an image (tests give one of their own).
        self.launcher = launcher
        #: The folder every container's compile caches share while the local AWS runs (set and
        #: removed by LocalAws); None: each container keeps its own.
        self.compile_cache: Path | None = None
        self._lock = threading.Lock()

    def deploy(
        self,
        key: tuple[str, str, str],
        config_name: str,
        variants: list[VariantSpec],
        fetch: ModelFetcher,
        on_settled: Callable[[HostedEndpoint], None],
        *,
        rollout: Rollout = ALL_AT_ONCE,
        alarm_states: AlarmStates | None = None,
    ) -> HostedEndpoint:
        """Start `config_name`'s containers for endpoint `key` in the background: a new endpoint
        turns InService or Failed; an existing one moves to them once they are healthy, as
        `rollout` says, and rolls back if one of its alarms (read with `alarm_states`) is in
        ALARM while it bakes."""
        # Before the runtime's lock: creating a backend takes moto's, which its reset holds.
        held = _held(key, create=True)
        with self._lock:
            endpoint = held.get(key[2])
            if endpoint is None:
                endpoint = held[key[2]] = HostedEndpoint(name=key[2])
            else:
                endpoint.status, endpoint.failure_reason = "Updating", None
            endpoint.settled.clear()
        thread = threading.Thread(
            target=self._bring_up,
            args=(endpoint, config_name, variants, fetch, on_settled, rollout, alarm_states),
            name=f"endpoint-{key[2]}",
            daemon=True,
        )
        thread.start()
        return endpoint

    def _bring_up(
        self,
        endpoint: HostedEndpoint,
        config_name: str,
        variants: list[VariantSpec],
        fetch: ModelFetcher,
        on_settled: Callable[[HostedEndpoint], None],
        rollout: Rollout,
        alarm_states: AlarmStates | None,
    ) -> None:
        started = time.monotonic()
        deployment = Deployment(
            config_name, {v.variant: v for v in variants}, fetch, self.launcher, compile_cache=self.compile_cache
        )
        with self._lock:
            endpoint.pending = deployment
            live = endpoint.live
        for spec in variants:
            # An update keeps the count scaling set (the stacks' RetainAllVariantProperties).
            deployment.desired[spec.variant] = live.desired.get(spec.variant, spec.count) if live else spec.count
        reason = self._start(endpoint, deployment, variants)
        if reason is None and endpoint.live is not None:
            reason = self._shift(endpoint, rollout, alarm_states, started)
        if reason is not None:
            deployment.stop()
            log.warning("endpoint %s: %s", endpoint.name, reason)
            with self._lock:
                endpoint.pending, endpoint.shifted, endpoint.failure_reason = None, 0.0, reason
                # A failed or rolled-back update leaves the endpoint on its previous config.
                endpoint.status = "InService" if endpoint.live is not None else "Failed"
                on_settled(endpoint)
            previous = None
        else:
            with self._lock:
                # The last of the traffic moves and the endpoint says so in one step.
                previous, endpoint.live, endpoint.pending = endpoint.live, deployment, None
                endpoint.shifted, endpoint.status, endpoint.failure_reason = 0.0, "InService", None
                on_settled(endpoint)
        if previous is not None:
            previous.drain(INVOCATION_TIMEOUT_S)
            previous.stop()
        endpoint.settled.set()

    def _start(self, endpoint: HostedEndpoint, deployment: Deployment, variants: list[VariantSpec]) -> str | None:
        """Start every variant's instances and wait for their /ping; the failure's reason, if any."""
        for spec in variants:
            if spec.refused is not None:
                return spec.refused
            unplaceable = spec.fleet.never_fits(spec.need) if spec.fleet is not None else None
            if unplaceable is not None:
                # The local AWS's words: AWS refuses such a component, and documents no message.
                return f"The inference component cannot be placed on production variant {spec.variant}: {unplaceable}"
            try:
                waited = 0.0
                for _ in range(deployment.desired[spec.variant]):
                    waited += deployment.start_instance(spec.variant)[1]
            except NoRoom as exc:
                if endpoint.live is not None:
                    # An update provisions its new copies beside the old ones (the API reference of
                    # InferenceComponentRollingUpdatePolicy); with no room for them it rolls back
                    # (the local AWS's words: AWS documents none).
                    return f"Deployment rolled back: {exc}, and managed instance scaling allows no more instances"
                # A new component's copies with no room wait for it (local_aws/sagemaker/placement.py).
                log.info("endpoint %s: %s copies placed, the rest wait for room", endpoint.name,
                         deployment.ready(spec.variant))  # fmt: skip
            except (ContainerError, OSError) as exc:
                return (
                    f"The primary container for production variant {spec.variant} did not pass the ping health "
                    f"check: {exc}"
                )
            except Exception as exc:  # the local AWS's own fault: the endpoint fails rather than stay Creating
                HOST.faults.record("sagemaker", f"starting endpoint {endpoint.name}", exc)
                return f"The local AWS failed to start the container of production variant {spec.variant}: {exc}"
            log.info("endpoint %s: variant %s answers /ping after %.1f s", endpoint.name, spec.variant, waited)
        return None

    def _shift(
        self, endpoint: HostedEndpoint, rollout: Rollout, alarm_states: AlarmStates | None, started: float
    ) -> str | None:
        """Move traffic to the pending config step by step, baking after each shift while
        watching the rollback alarms; the reason to roll back, if any."""
        for share, bake_s in rollout.steps:
            with self._lock:
                if endpoint.pending is None or endpoint.pending.stopped:
                    return "the endpoint was deleted during the update"
                endpoint.shifted = share
            reason = _bake(endpoint, share, bake_s, rollout, alarm_states, started)
            if reason is not None:
                return reason
        return None

    def find(self, key: tuple[str, str, str]) -> HostedEndpoint | None:
        with self._lock:
            return _held(key).get(key[2])

    def hosted(self) -> list[tuple[tuple[str, str, str], HostedEndpoint]]:
        """Every hosted endpoint (and component), by key."""
        with backend_lock:  # moto adds an account's or region's backend under it
            backends = [(a, r, backend) for a, regions in hosting_backends.items() for r, backend in regions.items()]
        with self._lock:
            return [
                ((a, r, name), endpoint) for a, r, backend in backends for name, endpoint in backend.endpoints.items()
            ]

    @contextlib.contextmanager
    def route(self, key: tuple[str, str, str], variant: str | None = None) -> Iterator[tuple[str, Container]]:
        """The (variant, container) an invocation goes to, the named variant else the first,
        held while the invocation is answered (an update stops it only after)."""
        with self._lock:
            endpoint = _held(key).get(key[2])
            if endpoint is None:
                raise EndpointNotFound(key[2])
            if endpoint.live is None or endpoint.status not in ("InService", "Updating"):
                raise NotInService(f"Endpoint {key[2]} is {endpoint.status}, not InService")
            deployment = endpoint.live
            pending = endpoint.pending
            if pending is not None and endpoint.shifted > 0 and random.random() < endpoint.shifted:  # noqa: S311
                deployment = pending  # the share of traffic an update has moved so far
            if variant is not None and variant not in deployment.specs:
                raise VariantNotFound(f"Variant {variant} not found on endpoint {key[2]}.")
            name = variant if variant is not None else next(iter(deployment.specs))
            container = deployment.least_busy(name)
            if container is not None:
                # Counted before the lock is let go: an update cannot stop it in between.
                deployment.begin(container)
        if container is None:
            with deployment._lock:
                found = list(deployment.instances.get(name, []))
            if not found:
                raise NoCapacity(name)
            raise self._crashed(key[2], name, found[0], deployment)
        try:
            yield name, container
        finally:
            deployment.end(container)

    def scale(
        self,
        key: tuple[str, str, str],
        variant: str,
        count: int,
        on_change: Callable[[HostedEndpoint, Deployment, str], None] | None = None,
    ) -> None:
        """Set the variant's instance count (a component's copies) to `count`: instances started
        (each in service once it answers /ping) or stopped (once what it answers is done) in the
        background, the endpoint Updating meanwhile; `on_change` after each one comes or goes,
        and once the count is reached."""
        with self._lock:
            endpoint = _held(key).get(key[2])
            if endpoint is None or endpoint.live is None:
                raise EndpointNotFound(key[2])
            deployment = endpoint.live
            if variant not in deployment.specs:
                raise VariantNotFound(f"Variant {variant} not found on endpoint {key[2]}.")
            deployment.desired[variant] = count
            if variant in deployment.reconciling:
                return  # the running reconciliation reads the new count
            deployment.reconciling.add(variant)
            if endpoint.status == "InService":
                endpoint.status = "Updating"
        threading.Thread(
            target=self._reconcile, args=(endpoint, deployment, variant, on_change), name=f"scale-{key[2]}", daemon=True
        ).start()

    def _reconcile(
        self,
        endpoint: HostedEndpoint,
        deployment: Deployment,
        variant: str,
        on_change: Callable[[HostedEndpoint, Deployment, str], None] | None,
    ) -> None:
        while True:
            with self._lock:
                wanted, have = deployment.desired[variant], deployment.ready(variant)
                if deployment.stopped or wanted == have:
                    deployment.reconciling.discard(variant)
                    if endpoint.status == "Updating" and endpoint.pending is None and not deployment.reconciling:
                        endpoint.status = "InService"
                    break
            try:
                if wanted > have:
                    waited = deployment.start_instance(variant)[1]
                    log.info(
                        "endpoint %s: an instance of %s answers /ping after %.1f s", endpoint.name, variant, waited
                    )
                else:
                    deployment.stop_instance(variant)
            except NoRoom:
                # The copies with no room wait (pending) until the component is scaled again.
                log.info("endpoint %s: no room for another copy of %s: it waits", endpoint.name, variant)
                with self._lock:
                    deployment.reconciling.discard(variant)
                    if endpoint.status == "Updating" and endpoint.pending is None and not deployment.reconciling:
                        endpoint.status = "InService"
                break
            except (ContainerError, OSError) as exc:
                log.warning("endpoint %s: an instance of variant %s failed to start: %s", endpoint.name, variant, exc)
                with self._lock:
                    deployment.desired[variant] = deployment.ready(variant)
            if on_change is not None:
                on_change(endpoint, deployment, variant)
        if on_change is not None:
            on_change(endpoint, deployment, variant)

    @staticmethod
    def _crashed(endpoint: str, variant: str, container: Container, deployment: Deployment) -> Unhealthy:
        """A container found exited: its log (CloudWatch's, on SageMaker) and what is left of its
        processes ended, as the end of a container ends them."""
        if container.process is None:
            return Unhealthy(variant, None)  # found before, and already stopped
        code = container.process.returncode
        log.warning(
            "endpoint %s: the container of variant %s exited (code %s):\n%s",
            endpoint,
            variant,
            code,
            container.log_tail(),
        )
        deployment.stop_container(container)
        return Unhealthy(variant, code)

    def delete(self, key: tuple[str, str, str]) -> None:
        with self._lock:
            endpoint = _held(key).pop(key[2], None)
        if endpoint is not None:
            _stop_endpoint(endpoint)

    def stop_all(self) -> None:
        for key, _ in self.hosted():
            self.delete(key)


def _fetcher(fetch: ModelFetcher, model_data: Mapping[str, Any]) -> Callable[[Path], None]:
    return lambda folder: fetch(model_data, folder)


def lay_out(
    model_data: Mapping[str, Any],
    folder: Path,
    read: Callable[[str, str], bytes],
    keys: Callable[[str, str], list[str]],
) -> None:
    """Fill `folder` as SageMaker fills /opt/ml/model from the container's model data:
    ``ModelDataUrl`` (a model.tar.gz, extracted) or ``ModelDataSource.S3DataSource`` with
    ``CompressionType: None`` (every object under the prefix, its key past the prefix as its
    path). `read(bucket, key)` and `keys(bucket, prefix)` reach S3."""
    if "ModelDataUrl" in model_data:
        bucket, key = split_s3_url(model_data["ModelDataUrl"])
        with tarfile.open(fileobj=io.BytesIO(read(bucket, key)), mode="r:gz") as tar:
            tar.extractall(folder, filter="data")
        return
    source = model_data.get("ModelDataSource", {}).get("S3DataSource")
    if source is None:
        return  # no model data: an image that carries its model
    bucket, prefix = split_s3_url(source["S3Uri"])
    if source.get("CompressionType", "None") != "None" or source.get("S3DataType") != "S3Prefix":
        bucket_key = (bucket, prefix)
        with tarfile.open(fileobj=io.BytesIO(read(*bucket_key)), mode="r:gz") as tar:
            tar.extractall(folder, filter="data")
        return
    for key in keys(bucket, prefix):
        target = folder / key[len(prefix) :]
        if folder.resolve() not in target.resolve().parents:
            raise ContainerError(f"s3://{bucket}/{key} would land outside /opt/ml/model")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(read(bucket, key))


def split_s3_url(url: str) -> tuple[str, str]:
    """(bucket, key) of ``s3://bucket/key``."""
    bucket, _, key = url.removeprefix("s3://").partition("/")
    return bucket, key


def hosting_plane() -> Hosting:
    """The process's hosting runtime (local_aws/host.py): every account's endpoints run there."""
    return HOST.plane(Hosting)


def _tripped(alarms: tuple[str, ...], alarm_states: AlarmStates | None) -> list[str]:
    if not alarms or alarm_states is None:
        return []
    states = alarm_states(alarms)
    return [name for name in alarms if states.get(name) == "ALARM"]


def _bake(
    endpoint: HostedEndpoint,
    share: float,
    bake_s: float,
    rollout: Rollout,
    alarm_states: AlarmStates | None,
    started: float,
) -> str | None:
    """Wait `bake_s` with `share` of the traffic on the new config, reading the rollback
    alarms as SageMaker does; the reason to roll back, if any."""
    deadline = time.monotonic() + bake_s
    while True:
        tripped = _tripped(rollout.alarms, alarm_states)
        if tripped:
            return (
                f"Deployment rolled back: the alarm(s) {', '.join(tripped)} went into ALARM while {share:.0%} of "
                "the traffic was on the new endpoint configuration"
            )
        if rollout.timeout_s is not None and time.monotonic() - started > rollout.timeout_s:
            return f"Deployment rolled back: it ran past its MaximumExecutionTimeoutInSeconds ({rollout.timeout_s:g})"
        pending = endpoint.pending
        if pending is None or pending.stopped:
            return "the endpoint was deleted during the update"
        if time.monotonic() >= deadline:
            return None
        time.sleep(min(ALARM_POLL_S, max(0.0, deadline - time.monotonic())))
