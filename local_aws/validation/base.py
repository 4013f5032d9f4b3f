"""What the three concerns of validation share: AWS's refusal of a request, a member's path
in a request and how AWS's messages write it, and the mark of a value CloudFormation resolves at
deploy time, which every check leaves alone."""

from __future__ import annotations

from moto.core.exceptions import ServiceException


class Rejected(ServiceException):
    """A request AWS refuses: the error code and message it answers with (HTTP 400), which moto
    answers in the service's protocol when a handler raises it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


#: Where a value is in a request: member names, and list items by index.
Path = tuple[str | int, ...]


class Unresolved:
    """A value CloudFormation resolves at deploy time (Ref, Fn::*): not checked at synthesis."""

    def __repr__(self) -> str:
        return "<unresolved>"


UNRESOLVED = Unresolved()


def member_path(path: Path) -> str:
    # AWS's messages write members in lower camel case and list items as "<n>.member" (1-based).
    parts = [f"{p + 1}.member" if isinstance(p, int) else p[:1].lower() + p[1:] for p in path]
    return ".".join(parts)
