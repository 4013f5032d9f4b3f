"""What every service's answers share: an error of the local AWS itself in the service's protocol
(local_aws/faults.py keeps and logs each)."""

from __future__ import annotations

import sys
from typing import Any

from flask import Flask, Response
from flask import request as flask_request
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from werkzeug.exceptions import HTTPException

from local_aws.faults import FAULTS, answer, where
from local_aws.patches.base import patch, replace

#: Whether the patch is installed: an app made while it was keeps the handler, which then lets
#: the exception through as stock moto does (a patch can be reverted on a running server).
ENABLED = False


def _handler(app: Flask) -> Any:
    backend = str(getattr(app, "service", ""))

    def handle(exc: Exception) -> Any:
        if isinstance(exc, HTTPException):
            return exc.get_response()  # moto's own answer to a path it does not route
        if not sys.modules[__name__].ENABLED:
            raise exc
        fault = FAULTS.record(backend, where(flask_request), exc)
        status, headers, body = answer(backend, fault)
        return Response(body, status=status, headers=headers)

    return handle


@patch(
    restores="""An error of the local AWS itself (an exception no handler expected) is answered as AWS
    answers its own errors, in the service's protocol, which the SDKs parse: HTTP 500 with
    InternalFailure ("The request processing has failed because of an unknown error, exception or
    failure", the API references' Common Errors; InternalError in S3's and EC2's XML), and it is
    logged with its traceback and counted (local_aws/faults.py), so that a test session in which one
    happened fails. Stock moto's server answers Flask's HTML page "500 Internal Server Error", which
    botocore reports as error code 500 with the page as its message."""
)
def internal_errors_answer_in_the_protocol() -> None:
    replace(sys.modules[__name__], "ENABLED", True)
    original = DomainDispatcherApplication.get_application

    def get_application(self: Any, environ: dict[str, Any]) -> Flask:
        app: Flask = original(self, environ)
        if not getattr(app, "answers_faults", False):
            app.register_error_handler(Exception, _handler(app))
            app.answers_faults = True  # type: ignore[attr-defined]
        return app

    replace(DomainDispatcherApplication, "get_application", get_application)
