"""The patch registry, and what the patches of every service share.

A patch is a function registered with :func:`patch` that installs replacements of moto's
internals with :func:`replace`; each replacement is recorded, so that a patch can be
reverted (tests show what stock moto does with :func:`without`) and installed again.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from moto.cloudformation import parsing as cfn_parsing
from moto.core.common_models import CloudFormationModel
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

#: The one moto release these patches were written against and tested with.
MOTO_VERSION = "5.2.5"

# The owner had no attribute of that name of its own (it inherited one, or had none).
_ABSENT = object()


@dataclass(frozen=True)
class _Replacement:
    owner: object
    name: str
    previous: object
    installed: object

    def undo(self) -> None:
        if vars(self.owner).get(self.name, _ABSENT) is not self.installed:
            # Restoring ours would drop whatever replaced it since.
            raise RuntimeError(f"{self.owner!r}.{self.name} was replaced again after the patch installed it")
        if self.previous is _ABSENT:
            delattr(self.owner, self.name)
        else:
            setattr(self.owner, self.name, self.previous)


@dataclass(eq=False)
class Patch:
    name: str
    #: The AWS behaviour the patch restores, and what stock moto does instead.
    restores: str
    installer: Callable[[], None] = field(repr=False)
    _replaced: list[_Replacement] = field(default_factory=list, repr=False)
    _installed: bool = field(default=False, repr=False)

    @property
    def installed(self) -> bool:
        return self._installed

    @property
    def replaced(self) -> list[tuple[object, str]]:
        """Where the installed patch replaced moto's attributes: (owner, attribute name)."""
        return [(r.owner, r.name) for r in self._replaced]

    def install(self) -> None:
        global _recording
        with _lock:
            if self._installed:
                return
            _recording = self._replaced
            try:
                self.installer()
            except BaseException:
                self._undo()
                raise
            finally:
                _recording = None
            self._installed = True
            _rebuild_routes()

    def revert(self) -> None:
        """Put back what the patch replaced: moto behaves as stock moto there again."""
        with _lock:
            if self._installed:
                self._undo()
                self._installed = False
                _rebuild_routes()

    def _undo(self) -> None:
        # Last first: a patch may replace an attribute it replaced before.
        while self._replaced:
            self._replaced.pop().undo()


PATCHES: list[Patch] = []
# Reentrant: `without` reverts and installs under it.
_lock = threading.RLock()
# Where `replace` records, while a patch installs.
_recording: list[_Replacement] | None = None


#: The dispatchers of the servers running in this process (:func:`serving`).
_DISPATCHERS: weakref.WeakSet[DomainDispatcherApplication] = weakref.WeakSet()


def serving(dispatcher: DomainDispatcherApplication) -> None:
    """A server answers through ``dispatcher``: its routes follow the patches installed now."""
    _DISPATCHERS.add(dispatcher)


def _rebuild_routes() -> None:
    # moto's dispatcher builds a service's Flask app once, from the service's url paths of that
    # moment (create_backend_app), and keeps it: a patch of those paths installed or reverted
    # while a server runs would otherwise change nothing until the process ends.
    for dispatcher in list(_DISPATCHERS):
        with dispatcher.lock:
            dispatcher.app_instances.clear()


def replace(owner: object, name: str, value: object) -> None:
    """Install ``value`` as ``owner.name`` (a moto class, module or method), for the patch
    being installed to revert."""
    if _recording is None:
        raise RuntimeError(f"replace({name!r}) outside a patch's installation could not be reverted")
    for other in PATCHES:
        if other._replaced is not _recording and any(r.owner is owner and r.name == name for r in other._replaced):
            # Reverting the first would drop the second, which wraps it.
            raise RuntimeError(f"{name} is already replaced by the patch {other.name}: one patch must do both")
    _recording.append(_Replacement(owner, name, vars(owner).get(name, _ABSENT), value))
    setattr(owner, name, value)


def patch(restores: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    def register(install: Callable[[], None]) -> Callable[[], None]:
        PATCHES.append(Patch(name=install.__name__, restores=" ".join(restores.split()), installer=install))
        return install

    return register


def apply() -> None:
    """Install every patch once per process (moto's classes are process-wide)."""
    with _lock:
        for p in PATCHES:
            p.install()


def find(name: str) -> Patch:
    for p in PATCHES:
        if p.name == name:
            return p
    raise KeyError(f"no patch named {name!r}; registered: {', '.join(p.name for p in PATCHES)}")


@contextmanager
def without(name: str) -> Iterator[Patch]:
    """Stock moto's behaviour where the patch ``name`` applies, for the duration; the patch is
    installed again afterwards if it was before. Process-wide, as the patches are: a local AWS
    running in this process answers as stock moto meanwhile."""
    p = find(name)
    was_installed = p.installed
    p.revert()
    try:
        yield p
    finally:
        if was_installed:
            p.install()


# --- Resource types stock moto lacks -------------------------------------------------------


class EmulatedResource(CloudFormationModel):
    """A CloudFormation resource type stock moto lacks, made of moto's own API models.

    Created at once, updated per :meth:`replaced_by`, deleted through :meth:`delete` (moto's
    stack deletion calls ``resource.delete`` before ``delete_from_cloudformation_json``).
    moto finds its types through ``CloudFormationModel.__subclasses__()``, which lists direct
    subclasses only: deriving from this class keeps a type out of stock moto until
    :func:`register_types` adds it, and out of it again when that patch is reverted. (This
    class itself is listed, under the type name "", which no template uses.)
    """

    #: The resource type in templates.
    TYPE: ClassVar[str] = ""
    #: The property that names the resource ("" if none), where moto puts the name it
    #: generates when the template gives none.
    NAME_PROPERTY: ClassVar[str] = ""
    #: Whether Fn::GetAtt can read Arn, the one attribute these types have.
    HAS_ARN: ClassVar[bool] = False
    #: Whether the patch that emulates the type is installed (see :func:`register_types`).
    ENABLED: ClassVar[bool] = False

    @classmethod
    def cloudformation_type(cls) -> str:
        return cls.TYPE

    @classmethod
    def cloudformation_name_type(cls) -> str:
        return cls.NAME_PROPERTY

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return cls.HAS_ARN and attr == "Arn"

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        return self.arn

    @property
    def arn(self) -> str:
        raise NotImplementedError(f"{self.TYPE} has no Arn")

    @property
    def physical_resource_id(self) -> str:
        raise NotImplementedError

    def is_created(self) -> bool:
        return True

    @classmethod
    def create(cls, name: str, properties: dict[str, Any], account_id: str, region_name: str) -> Any:
        """The resource ``properties`` describe, created in moto's backend under ``name``."""
        raise NotImplementedError

    def replaced_by(self, properties: dict[str, Any]) -> bool:
        """Whether an update to ``properties`` deletes this resource (a resource the update
        does not delete is overwritten in place by creating it again)."""
        return True

    def name_after_update(self, new_resource_name: str) -> str:
        return new_resource_name

    def delete(self, account_id: str, region_name: str) -> None:
        raise NotImplementedError

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> Any:
        return cls.create(resource_name, cloudformation_json["Properties"], account_id, region_name)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> Any:
        properties = cloudformation_json["Properties"]
        if original_resource.replaced_by(properties):
            original_resource.delete(account_id, region_name)
        name = original_resource.name_after_update(new_resource_name)
        return cls.create(name, properties, account_id, region_name)

    @classmethod
    def delete_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        raise NotImplementedError(f"{cls.__name__} {resource_name} is deleted through its delete()")


def register_types(*types: type[EmulatedResource]) -> None:
    """Make moto's CloudFormation create, update and delete resources of ``types`` while the
    patch being installed is (reverting it turns them off again). Custom:: types are found
    through ``cloudformation.custom_resources_invoke_their_function``' mapping, the others
    through moto's type map, which the first patch to register a type makes follow the
    enabled types."""
    for model in types:
        replace(model, "ENABLED", True)
    if not getattr(cfn_parsing.get_model_list, "follows_enabled_types", False):
        _follow_enabled_types()
    known = cfn_parsing.get_model_map()
    for model in types:
        if not model.TYPE.startswith("Custom::") and known.get(model.cloudformation_type()) is not model:
            raise RuntimeError(f"moto did not register {model.cloudformation_type()}; is moto {MOTO_VERSION}?")


def enabled_types() -> list[type[EmulatedResource]]:
    """Every emulated type whose patch is installed."""
    found, todo = [], list(EmulatedResource.__subclasses__())
    while todo:
        model = todo.pop()
        todo += model.__subclasses__()
        if model.ENABLED:
            found.append(model)
    return found


def _follow_enabled_types() -> None:
    stock = cfn_parsing.get_model_list

    def get_model_list() -> list[Any]:
        return [*stock(), *(t for t in enabled_types() if not t.TYPE.startswith("Custom::"))]

    get_model_list.follows_enabled_types = True  # type: ignore[attr-defined]
    replace(cfn_parsing, "get_model_list", get_model_list)
    # moto caches the maps it derives from the list: uncached here, since the list changes as
    # patches are installed and reverted (a revert puts back the cached stock functions).
    for derived in ("get_model_map", "get_name_type_map"):
        replace(cfn_parsing, derived, getattr(cfn_parsing, derived).__wrapped__)


# --- Properties stock moto ignores ----------------------------------------------------------

#: Reads the properties moto ignores before it creates: properties -> properties.
Prepare = Callable[[dict[str, Any]], dict[str, Any]]
#: Applies the properties moto ignored to what it created: (resource, properties, account, region).
Fix = Callable[[Any, dict[str, Any], str, str], None]


def wrap_create(model: type[Any], *, prepare: Prepare | None = None, fix: Fix | None = None) -> None:
    """Wrap ``model.create_from_cloudformation_json``: ``prepare`` rewrites the properties moto
    reads, ``fix`` runs on each new resource (moto's update methods that replace create
    through it too)."""
    create = model.create_from_cloudformation_json.__func__

    def create_wrapped(
        cls: Any, /, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str,
        **kw: Any,
    ) -> Any:  # fmt: skip
        props = cloudformation_json["Properties"]
        given = {**cloudformation_json, "Properties": prepare(props)} if prepare else cloudformation_json
        resource = create(cls, resource_name, given, account_id, region_name, **kw)
        if fix:
            fix(resource, props, account_id, region_name)
        return resource

    replace(model, "create_from_cloudformation_json", classmethod(create_wrapped))
