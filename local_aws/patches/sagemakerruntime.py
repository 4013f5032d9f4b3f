"""SageMaker runtime: the three invocations answered by the local runtime
(local_aws/sagemaker/operations.py: who may call, routing, metrics, errors); this module wires
them into moto, each handler parsing the request and making one call, and says what each patch
restores."""

from __future__ import annotations

from typing import Any

import moto.sagemakerruntime.urls as runtime_urls
from moto.core.common_types import TYPE_RESPONSE
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.sagemakerruntime.responses import SageMakerRuntimeResponse
from werkzeug.datastructures import ImmutableMultiDict

from local_aws.patches.base import patch, replace
from local_aws.sagemaker import metrics, operations
from local_aws.sagemaker.errors import MAX_PAYLOAD_BYTES, answer_refusal, too_large
from local_aws.sagemaker.invocations import STREAM_PATH_SUFFIX, endpoint_name
from local_aws.sagemaker.operations import RuntimeRequest
from local_aws.validation.model import check_request, rest_parameters

# --- The request as the caller sent it ----------------------------------------------------------

#: The runtime's paths: an EndpointName is routed whatever it holds (botocore percent-encodes a
#: slash in it, which the server decodes), so that the model's pattern refuses it, as AWS does.
RUNTIME_PATHS = {
    "{0}/endpoints/(?P<name>.+)/async-invocations$": runtime_urls.response.dispatch,
    "{0}/endpoints/(?P<name>.+)/invocations$": runtime_urls.response.dispatch,
    "{0}/endpoints/(?P<name>.+)/invocations-response-stream$": runtime_urls.response.dispatch,
}


#: The operation each path of the runtime is for, by its end.
ACTIONS = {
    "/async-invocations": "InvokeEndpointAsync",
    "/invocations-response-stream": "InvokeEndpointWithResponseStream",
    "/invocations": "InvokeEndpoint",
}


@patch(
    restores="""The runtime's calls carry a body of any bytes (InvokeEndpoint's Body is a blob of up to
    6 MB, botocore's sagemaker-runtime model: images, audio, any binary payload), which reaches the
    container exactly as sent, whatever its ContentType; only the request's path and headers say
    which endpoint and operation it is for. Stock moto decodes every body as UTF-8
    (BaseResponse.setup_class), so a body that is not UTF-8 fails with an HTML 500 before any
    handler runs; it parses a body of a form's content type as a form (the container gets an empty
    body) and finds no operation for it or for JSON 1.1's (HTTP 404), and reads a body that looks
    like a query string ("EndpointName=x&Action=y") as the request's parameters, so that a body
    can send the call to another endpoint or operation."""
)
def runtime_bodies_are_bytes() -> None:
    setup = SageMakerRuntimeResponse.setup_class

    def setup_class(
        self: Any, request: Any, full_url: str | None = None, headers: Any = None, use_raw_body: bool | None = None
    ) -> None:
        request.get_data(cache=True)  # the bytes as they came, before anything parses them as a form
        request.__dict__.update(form=ImmutableMultiDict(), files=ImmutableMultiDict())
        setup(self, request, full_url, headers, use_raw_body=True)

    def get_action(self: Any) -> str | None:
        # By the path alone: moto picks its router by the body's content type, and finds no
        # operation for a form's or JSON 1.1's.
        for suffix, operation in ACTIONS.items():
            if self.path.endswith(suffix):
                return operation
        return None

    replace(SageMakerRuntimeResponse, "setup_class", setup_class)
    replace(SageMakerRuntimeResponse, "_get_action", get_action)
    replace(runtime_urls, "url_paths", RUNTIME_PATHS)


#: The runtime's operations.
OPERATIONS = ("InvokeEndpoint", "InvokeEndpointWithResponseStream", "InvokeEndpointAsync")


def _parameters(self: Any, operation: str) -> dict[str, Any]:
    """The request's parameters as botocore's model names them: the path's and the headers'
    members, and the body as the payload."""
    return rest_parameters(
        "sagemaker-runtime", operation, uri={"EndpointName": endpoint_name(self)}, headers=self.headers, body=self.body
    )


@patch(
    restores="""The runtime's requests are checked as AWS checks them before any endpoint sees them: a
    body over 6 MB (6,291,456 bytes) is answered HTTP 413 ("HTTP content length exceeded ...
    bytes.", aws/sagemaker-python-sdk#171), and a request that breaks botocore's sagemaker-runtime
    model (CustomAttributes, ContentType or Accept over 1,024 characters or not ASCII; an
    EndpointName, TargetVariant, InferenceComponentName or SessionId off its pattern or length; an
    InferenceId over 64; an InvocationTimeoutSeconds outside 1-3600, ...) with ValidationError and
    the model's "1 validation error detected" message (a sensitive member's value left out, as
    aws/aws-sdk-js#4203 quotes it). Stock moto checks nothing, and botocore's client checks only
    types, required members and minimums: a CustomAttributes of 1,025 characters reaches the
    container."""
)
def runtime_requests_are_validated() -> None:
    original = SageMakerRuntimeResponse.call_action

    def call_action(self: Any) -> TYPE_RESPONSE:
        operation = self._get_action()
        if operation in OPERATIONS and len(self.body or b"") > MAX_PAYLOAD_BYTES:
            return too_large(len(self.body))
        if operation in OPERATIONS:
            refused = check_request("sagemaker-runtime", operation, _parameters(self, operation))
            if refused is not None:
                return answer_refusal(refused)
        return original(self)

    replace(SageMakerRuntimeResponse, "call_action", call_action)


@patch(
    restores="""InvokeEndpoint reaches the endpoint's container: body, ContentType, Accept,
    CustomAttributes and SessionId passed through, its answer returned; a 4xx or 5xx of the
    container becomes ModelError (424) with its status and body; an endpoint that does not exist
    or is not in service is a ValidationError, as are a TargetVariant it lacks, a TargetModel or
    TargetContainerHostname (none is multi-model or multi-container) and a real-time call to an
    asynchronous endpoint; no answer within 60 s is a ModelError. With InferenceComponentName,
    the component's container answers (a component of another endpoint, or none, is a
    ValidationError, as is an endpoint of components called without one). A variant whose
    container exited after InService, or that closes the connection without an answer, is a
    ModelError with status 0 ("could not get a response"), and what is left of a crashed
    container's processes is ended. A
    caller signed as an assumed role whose policies do not allow sagemaker:InvokeEndpoint on the
    endpoint's ARN (names in lower case, as SageMaker writes them) gets AccessDeniedException.
    Stock moto answers every invocation with canned text."""
)
def invocations_reach_the_container() -> None:
    def invoke_endpoint(self: Any) -> TYPE_RESPONSE:
        return operations.invoke_endpoint(RuntimeRequest.of(self))

    replace(SageMakerRuntimeResponse, "invoke_endpoint", invoke_endpoint)


@patch(
    restores="""InvokeEndpointWithResponseStream (POST /endpoints/<name>/invocations-response-stream,
    botocore's sagemaker-runtime model) reaches the endpoint's container and answers its chunked
    answer as the event stream botocore reads (application/vnd.amazon.eventstream): each piece
    the container sends, as it arrives, a PayloadPart; an answer cut before its end a
    ModelStreamError (StreamBroken); one past the time limit a ModelStreamError
    (ModelInvocationTimeExceeded); a 4xx or 5xx of the container before the stream is ModelError
    (424), a missing endpoint a ValidationError, a crashed container the
    ModelError of InvokeEndpoint. A caller that goes away
    closes the connection to the container. A caller signed as an assumed role whose policies do
    not allow sagemaker:InvokeEndpoint (the action this operation is authorized by, Service
    Authorization Reference) on the endpoint gets AccessDeniedException, as on InvokeEndpoint.
    Stock moto routes the path to no handler."""
)
def streamed_invocations_reach_the_container() -> None:
    def routed(self: Any, environ: dict[str, Any], path: str) -> str | None:
        host: str | None = original(self, environ, path)
        # moto sends SageMaker's runtime paths to the runtime by their end ("invocations") only.
        if host is not None and host.startswith("api.sagemaker.") and path.endswith(STREAM_PATH_SUFFIX):
            return host.replace("api.sagemaker.", "runtime.sagemaker.", 1)
        return host

    def invoke_endpoint_with_response_stream(self: Any) -> TYPE_RESPONSE:
        return operations.invoke_endpoint_with_response_stream(RuntimeRequest.of(self))

    original = DomainDispatcherApplication.infer_service_region_host
    replace(DomainDispatcherApplication, "infer_service_region_host", routed)
    replace(SageMakerRuntimeResponse, "invoke_endpoint_with_response_stream", invoke_endpoint_with_response_stream)


@patch(
    restores="""InvokeEndpointAsync queues the request and answers 202 with its id and where its
    answer and failure will be; then, as SageMaker does, the input (inline in Body, up to 128,000
    bytes, or read from S3 at InputLocation: exactly one of them) is sent to the endpoint's
    container, and the answer written to <S3OutputPath>[/<S3OutputPathExtension>]/<Filename or
    id.out> (or the reason to the failure path's <id>-error.out) and announced on the
    SuccessTopic (or ErrorTopic). An endpoint without AsyncInferenceConfig or not InService,
    both or neither of Body and InputLocation, or an input that is not an S3 URI is a
    ValidationError; an assumed role not allowed sagemaker:InvokeEndpointAsync on the endpoint
    gets AccessDeniedException. Stock moto answers with canned locations where nothing is ever
    written."""
)
def async_invocations_answer_through_s3() -> None:
    def invoke_endpoint_async(self: Any) -> TYPE_RESPONSE:
        return operations.invoke_endpoint_async(RuntimeRequest.of(self))

    replace(SageMakerRuntimeResponse, "invoke_endpoint_async", invoke_endpoint_async)


@patch(
    restores="""SageMaker publishes its metrics of what an endpoint serves and runs, each in the
    namespace, with the dimensions and in the modes the catalog of what SageMaker publishes says
    (llm_contracts/sagemaker_metrics.py, with its sources): per invocation (InvokeEndpoint,
    InvokeEndpointWithResponseStream, InvokeEndpointAsync) its count, per instance or per copy,
    the model's 4xx, 5xx and errors, its latency and SageMaker's overhead, the requests in
    flight; per request that finds no copy NoCapacityInvocationFailures; per asynchronous request
    its times and failure; every minute each instance's CPU, memory and disk use (its container's
    processes and files), each idle variant's or component's zero invocations and each
    asynchronous endpoint's queue (local_aws/sagemaker/metrics.py). Stock moto publishes nothing."""
)
def sagemaker_publishes_its_metrics() -> None:
    replace(metrics.MetricsBackend, "PUBLISHES", True)
