"""Start and stop the local AWS: moto's threaded server on a free port of 127.0.0.1.

The server runs in this process, so that state AWS itself would hold (the public Neuron
DLAMI parameter, which moto's API refuses to create under ``/aws/service/``) can be put
straight into moto's backends, and so that the patches of :mod:`local_aws.patches` apply.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import Any

from moto.core.config import default_user_config
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.core.utils import utcnow
from moto.ec2.models import ec2_backends
from moto.moto_api._internal.models import moto_api_backend
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.server import ThreadedMotoServer
from moto.ssm.models import Parameter, ssm_backends

from local_aws import awslambda, patches
from local_aws import clock as clocks
from local_aws.host import HOST
from local_aws.sagemaker.runtime import hosting_plane
from local_aws.schedule import JOBS

#: The account moto answers as; every ARN the emulator returns names it.
EMULATOR_ACCOUNT: str = DEFAULT_ACCOUNT_ID
#: The emulator's own default region, used when the environment names none.
EMULATOR_DEFAULT_REGION = "us-east-1"
LOOPBACK = "127.0.0.1"
# Credentials moto accepts; set explicitly so that no profile of the host is ever used.
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local-aws", "AWS_SECRET_ACCESS_KEY": "local-aws"}
# Variables that would point the CLI or boto3 at a real account or a role to assume.
_HOST_AWS_VARIABLES = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN")


class UnsupportedMotoVersion(RuntimeError):
    """The installed moto is not the version the patches were written against."""


def check_moto_version() -> str:
    """The installed moto version; raises unless it is the one the patches fit."""
    installed = metadata.version("moto")
    if installed != patches.MOTO_VERSION:
        raise UnsupportedMotoVersion(
            f"moto {installed} is installed, but local_aws patches moto {patches.MOTO_VERSION}'s "
            "CloudFormation internals and would misbehave on another version; install "
            f"moto[server]=={patches.MOTO_VERSION} (requirements-dev.txt)"
        )
    return installed


class LocalAws:
    """moto on ``127.0.0.1:<free port>`` with the project's patches and seeded parameters.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. Starting resets every
    moto backend of this process, so each start is a fresh, empty account.

    :param region: the region the CLI and boto3 are pointed at (default: ``AWS_REGION``,
        else the emulator's default region).
    :param aws_managed_policies: whether the account has AWS's managed policies, as every
        account has; without them, each start or :meth:`reset` is about a second faster.
        (A moto setting, so process-wide: the last local AWS started decides.)
    :param clock: the time its services keep, CloudWatch's schedule of alarm evaluations
        among them (default: wall time; tests pass ``Clock(speed=0)`` and move it with
        ``advance``: :mod:`local_aws.clock`).
    """

    def __init__(
        self, region: str | None = None, *, aws_managed_policies: bool = True, clock: clocks.Clock | None = None
    ) -> None:
        self.region = region or os.environ.get("AWS_REGION") or EMULATOR_DEFAULT_REGION
        self.aws_managed_policies = aws_managed_policies
        self.clock = clock or clocks.Clock()
        self.account = EMULATOR_ACCOUNT
        self._server: ThreadedMotoServer | None = None
        self._port: int | None = None
        self._clients: dict[str, Any] = {}
        self._clients_lock = threading.Lock()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the local AWS is not running: call start() first")
        return self._port

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> LocalAws:
        if self._server is not None:
            return self
        check_moto_version()
        patches.apply()
        hosting_plane().stop_all()  # a fresh account hosts nothing
        awslambda.stop_all()
        # What the containers compile (vLLM's kernels, torch's precompiled header) is the same
        # files for each: compiled once while this local AWS runs (docs/LOCAL_AWS.md).
        hosting_plane().compile_cache = Path(tempfile.mkdtemp(prefix="local-aws-compile-cache-"))
        # AWS-managed policies exist in every account; roles attach them by ARN
        # (ManagedPolicyArns), which moto refuses for a policy it has not loaded.
        default_user_config.setdefault("iam", {})["load_aws_managed_policies"] = self.aws_managed_policies
        _reset_backends()
        HOST.run_clock(self.clock, JOBS)
        # Port 0: the OS picks a free port; the server reports which one it bound.
        # One log line per request would drown test and demo output; errors still surface.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        server = ThreadedMotoServer(ip_address=LOOPBACK, port=0, verbose=False)
        server.start()
        # moto keeps the server private; its app is the dispatcher it made.
        dispatcher = getattr(server._server, "app", None)
        assert isinstance(dispatcher, DomainDispatcherApplication), dispatcher
        patches.serving(dispatcher)
        self._server = server
        self._port = server.get_host_and_port()[1]
        patches.set_endpoint(
            self.endpoint, FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"], FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]
        )
        return self

    def stop(self) -> None:
        # The endpoints' containers and functions first: processes of this host, not of the server.
        hosting_plane().stop_all()
        awslambda.stop_all()
        cache, hosting_plane().compile_cache = hosting_plane().compile_cache, None
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
        server, self._server = self._server, None
        if server is not None:
            server.stop()
            self.clock.stop()
            _reset_backends()
        self._port = None
        with self._clients_lock:  # they name the old port
            self._clients.clear()

    def reset(self) -> None:
        """Forget every resource: a fresh, empty account, as after :meth:`start`."""
        self.port  # noqa: B018 -- raises unless started: there is nothing to reset
        hosting_plane().stop_all()
        awslambda.stop_all()
        _reset_backends()

    def __enter__(self) -> LocalAws:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for the CDK CLI and AWS SDKs: ``base`` (default: this process's
        environment) pointed at the local AWS, with fake credentials and no host profile."""
        env = {k: v for k, v in (os.environ if base is None else base).items() if k not in _HOST_AWS_VARIABLES}
        env.update(FAKE_CREDENTIALS)
        env.update(
            {
                # An IP host makes the SDKs address S3 path-style (http://127.0.0.1:PORT/bucket).
                "AWS_ENDPOINT_URL": self.endpoint,
                # The CLI builds the TemplateURL it hands CloudFormation from this endpoint;
                # with an IP host, moto would read "127.0.0.1" as the bucket name.
                "AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION": f"http://localhost:{self.port}",
                "AWS_REGION": self.region,
                "AWS_DEFAULT_REGION": self.region,
                "CDK_DEFAULT_ACCOUNT": self.account,
                "CDK_DEFAULT_REGION": self.region,
                # Never fall back to a credentials file or the instance metadata service.
                "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true",
            }
        )
        return env

    def client(self, service: str, *, fresh: bool = False, **options: Any) -> Any:
        """A boto3 client of the local AWS; ``options`` go to ``boto3.client`` (``config``).

        Without options, the same client for the same service, made once: making one costs tens
        of milliseconds of CPU (botocore builds its class anew), which tests that ask a
        resource's state in a loop paid on every question. boto3's clients are safe to share
        between threads; what is not shared is a handler registered on one's events: a caller
        that registers one asks for a ``fresh`` client of its own (as one with options is)."""
        if fresh or options:
            return self._new_client(service, **options)
        with self._clients_lock:
            made = self._clients.get(service)
            if made is None:
                made = self._clients[service] = self._new_client(service)
        return made

    def _new_client(self, service: str, **options: Any) -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            **options,
        )

    def ecr_image_uri(self, repository: str, tag: str) -> str:
        """An image URI in this account's ECR registry (no Docker engine publishes image
        assets here, so stacks that build an image are given a URI instead)."""
        return f"{self.account}.dkr.ecr.{self.region}.amazonaws.com/{repository}:{tag}"

    def stack_outputs(self, stack: str) -> dict[str, str]:
        described = self.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
        return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}

    def seed_ami_parameter(self, parameter_name: str, *, image_name: str, description: str = "") -> str:
        """Publish ``parameter_name`` as AWS publishes its public AMI parameters (a
        ``String`` of data type ``aws:ec2:image``) and register the image it names.

        moto's API refuses names under ``/aws/service/``, so the parameter goes straight into
        its SSM backend. Returns the image id."""
        self.port  # noqa: B018 -- raises unless started: a reset at start would drop the seed
        image = ec2_backends[self.account][self.region].register_image(name=image_name, description=description)
        # Of a root volume of EBS, as the AMIs AWS publishes these parameters for are (moto registers
        # "standard", a RootDeviceType outside the model's ebs | instance-store).
        image.root_device_type = "ebs"
        ssm = ssm_backends[self.account][self.region]
        ssm._parameters[parameter_name].append(
            Parameter(  # type: ignore[abstract]
                account_id=self.account,
                name=parameter_name,
                value=image.id,
                parameter_type="String",
                description=description or None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=utcnow(),
                version=len(ssm._parameters[parameter_name]) + 1,
                data_type="aws:ec2:image",
            )
        )
        return str(image.id)


def _reset_backends() -> None:
    """Forget every resource moto holds in this process, as its /moto-api/reset does."""
    moto_api_backend.reset()


def seed_neuron_dlami(aws: LocalAws, parameter_name: str | None = None) -> str:
    """Publish the Neuron DLAMI parameter Inf2Stack resolves (``inf2.ami_ssm_parameter`` of
    cdk.json unless given) with a registered stand-in image; returns the image id. Only a name AWS
    publishes (llm_contracts/inf2.py's NEURON_DLAMI_PARAMETERS, with their source): a parameter of
    your own is yours to put, and one AWS retired must fail the deploy here as it would there."""
    from llm_contracts.inf2 import NEURON_DLAMI_PARAMETERS

    if parameter_name is None:
        from llm_inference_cdk.inf2.props import Inf2ServerProps
        from project_config import from_cdk_json

        # On inf2.platform sagemaker no host boots from it: the default parameter is published all the same.
        parameter_name = (from_cdk_json().inf2.server or Inf2ServerProps()).ami_ssm_parameter
    if parameter_name not in NEURON_DLAMI_PARAMETERS:
        raise ValueError(
            f"{parameter_name} is not a Neuron DLAMI parameter AWS publishes: one of "
            f"{', '.join(sorted(NEURON_DLAMI_PARAMETERS))}; put a parameter of your own with `aws ssm put-parameter`"
        )
    return aws.seed_ami_parameter(
        parameter_name,
        image_name="neuron-dlami-local-stand-in",
        description="Stands in for the AWS Deep Learning AMI Neuron that this public parameter names",
    )
