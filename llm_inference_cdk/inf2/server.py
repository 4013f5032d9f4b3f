"""An EC2 inf2 instance that runs a DJL Serving (LMI) container on a model bundle.

The instance has no SSH key, IMDSv2 only, an encrypted root volume, and no ingress unless a
CIDR is given; operators reach it through SSM Session Manager (port forwarding for HTTP). Its
user data installs the files beside this module (a systemd unit and its scripts) and runs the
bootstrap at every boot: it checks the bundle's sha256, pulls the image and starts the
service, which waits for DJL's ``/ping`` for ``load_timeout_s``.
"""

from __future__ import annotations

import base64
import gzip
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import Annotations, Duration, RemovalPolicy, Stack, Tags
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from llm_contracts.inf2 import NEURON_DLAMI_PARAMETERS
from llm_inference_cdk.images import ContainerImage
from llm_inference_cdk.inf2.props import Inf2ServerProps
from llm_inference_cdk.model_data import ModelAsset
from llm_inference_cdk.nag import acknowledge

HOST_FILES = Path(__file__).resolve().parent
#: Where the host publishes DJL's port: loopback alone, or every IPv4 address of the host.
LOOPBACK, ANY_ADDRESS = "127.0.0.1", "0.0.0.0"  # noqa: S104 (only with an ingress CIDR, which the group enforces)
#: EC2 refuses user data over 16 KB (the deploy fails; the local AWS does not check).
USER_DATA_LIMIT = 16_384
ROOT_DEVICE = "/dev/sda1"  # the root device name of the Ubuntu-based Neuron DLAMIs
# cloud-init runs user data scripts once per instance by default; the bootstrap runs at
# every boot instead, so a stop/start after a settings change (CloudFormation updates the
# user data that way) converges the server to the new bundle and image.
EVERY_BOOT = "#cloud-config\ncloud_final_modules:\n- [scripts-user, always]\n"
#: Files the user data installs: (source beside this module, target path, mode).
INSTALLED = (
    ("run-container.sh", "/usr/local/bin/djl-serving-run", "0755"),
    ("wait-ping.sh", "/usr/local/bin/djl-serving-wait", "0755"),
    ("djl-serving.service", "/etc/systemd/system/djl-serving.service", "0644"),
    ("health-check.sh", "/usr/local/bin/djl-serving-health", "0755"),
    ("djl-serving-health.service", "/etc/systemd/system/djl-serving-health.service", "0644"),
    ("djl-serving-health.timer", "/etc/systemd/system/djl-serving-health.timer", "0644"),
    ("neuron_metrics.py", "/usr/local/bin/neuron-metrics", "0755"),
    ("neuron-metrics.service", "/etc/systemd/system/neuron-metrics.service", "0644"),
    ("ship-log.sh", "/usr/local/bin/llm-inference-ship-log", "0755"),
    ("llm-inference-bootstrap-log.service", "/etc/systemd/system/llm-inference-bootstrap-log.service", "0644"),
    ("llm-inference-bootstrap-log.timer", "/etc/systemd/system/llm-inference-bootstrap-log.timer", "0644"),
)
#: Files the user data carries gzip-compressed, base64-encoded: those over this many bytes
#: (without their comments), so that the rest fits EC2's limit.
COMPRESS_OVER = 1000
#: The CloudWatch namespace of the host's metrics (health check, Neuron metrics), per instance
#: (dimension InstanceId); the role may put metrics in it alone.
METRIC_NAMESPACE = "LLMInference/Inf2"
#: What SSM Agent needs for Session Manager (shell and port forwarding): AWS's own
#: Session-Manager-only policy (AWSCloud9SSMInstanceProfile) grants these five. Left out of
#: AmazonSSMManagedInstanceCore: ssm:GetParameter(s) on every parameter of the account, documents,
#: associations, inventory, patching and ec2messages:* (Run Command), none of which this host uses.
SESSION_MANAGER_ACTIONS = (
    "ssm:UpdateInstanceInformation",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
)


def grant_session_manager(grantee: iam.IGrantable) -> iam.Grant:
    """Let `grantee` (an instance's role) take SSM Session Manager sessions, and nothing else of
    Systems Manager."""
    # "*": these actions define no resource type in the Service Authorization Reference, so AWS
    # accepts no narrower Resource. They take an ec2:SourceInstanceARN condition, but this role
    # belongs to one instance, and naming it here would make the role's policy, which the
    # instance waits for, wait for the instance.
    return iam.Grant.add_to_principal(grantee=grantee, actions=list(SESSION_MANAGER_ACTIONS), resource_arns=["*"])


def health_alarm_window(load_timeout_s: int) -> tuple[int, int]:
    """(period, periods) of the health alarm: the fewest 5-minute periods (hour-long ones past a
    day) that cover the load time with one period to spare; the alarm evaluates one period more
    (Inf2Server.health_alarm), within CloudWatch's limit on what an alarm evaluates (a day of
    periods under an hour, a week of longer ones)."""
    for period_s, limit_s in ((300, 86_400), (3600, 604_800)):
        periods = -(-load_timeout_s // period_s) + 1
        if period_s * (periods + 1) <= limit_s:
            return period_s, periods
    raise ValueError(f"load_timeout_s={load_timeout_s} is longer than a health alarm can wait")


def allow_host_egress(security_group: ec2.ISecurityGroup) -> None:
    """What the host sends, all of it HTTPS: SSM (Session Manager), S3 (the bundle, and ECR's image
    layers), ECR, CloudWatch Logs and metrics, and the Hugging Face hub (a bundle without its model
    downloads it; the bundle's requirements come from PyPI), all through the NAT gateway. Nothing
    else needs a rule: security groups do not filter the VPC's Amazon DNS resolver, the instance
    metadata service or the Amazon Time Sync Service. Not allowed: Ubuntu's archive over HTTP
    (unattended upgrades; the host is patched by moving to a newer DLAMI) and DNS servers other
    than the VPC's (a VPC whose DHCP options name others needs a group of its own). A group that
    allows all outbound traffic already lets this through."""
    security_group.add_egress_rule(
        ec2.Peer.any_ipv4(),
        ec2.Port.tcp(443),
        # EC2 takes only a-zA-Z0-9, spaces and ._-:/()#,@[]+=&;{}!$* here (no apostrophe).
        "HTTPS to SSM, S3, ECR, CloudWatch and the Hugging Face hub (the addresses of AWS and the hub are not fixed)",
    )


def installed_text(source: str) -> str:
    """A host file as the user data carries it: without its comment lines (the first line, a
    shebang, stays) and blank lines, for which EC2's 16 KB limit has no room; the files here keep
    them."""
    first, *rest = (HOST_FILES / source).read_text().splitlines()
    kept = [line for line in rest if line.strip() and not line.lstrip().startswith("#")]
    return "\n".join([first, *kept]) + "\n"


def installed_body(source: str) -> tuple[str, str]:
    """(command, heredoc body) that installs `source` from the user data: ``put`` with its text,
    or, for a file over COMPRESS_OVER bytes, ``unpack`` with its gzip (no timestamp, so the same
    file gives the same user data) in base64."""
    text = installed_text(source)
    if len(text.encode()) <= COMPRESS_OVER:
        return "put", text
    return "unpack", base64.encodebytes(gzip.compress(text.encode(), mtime=0)).decode()


def render_user_data(settings: Mapping[str, str]) -> str:
    """The instance's shell script: settings, the systemd units and their scripts, then
    bootstrap.sh. Values may be CDK tokens; they are quoted for the shell."""
    header = "".join(f"export {key}={shlex.quote(value)}\n" for key, value in settings.items())
    # put TARGET MODE: stdin to TARGET, replaced in one rename (a script may be running);
    # unpack TARGET MODE: the same, from gzip in base64.
    put = (
        'put() { cat >"$1.tmp" && chmod "$2" "$1.tmp" && mv -f "$1.tmp" "$1"; }\n'
        'unpack() { base64 -d | gunzip | put "$@"; }\n'
    )
    files = "".join(
        f"{command} {target} {mode} <<'INSTALLED_FILE'\n{body}INSTALLED_FILE\n"
        for source, target, mode in INSTALLED
        for command, body in [installed_body(source)]
    )
    body = installed_text("bootstrap.sh").split("\n", 1)[1]
    return (
        "#!/bin/bash\nset -euo pipefail\n"
        + header
        + "install -d -m 0755 /usr/local/bin /etc/systemd/system\n"
        + put
        + files
        + body
    )


def user_data(script: str) -> ec2.UserData:
    """A MIME multipart user data: the every-boot cloud-config, then the script, as it is (ASCII
    text: base64, CDK's default for a part, would make it a third longer)."""
    multipart = ec2.MultipartUserData()
    multipart.add_part(
        ec2.MultipartBody.from_raw_body(content_type='text/cloud-config; charset="utf-8"', body=EVERY_BOOT)
    )
    multipart.add_part(ec2.MultipartBody.from_raw_body(content_type=ec2.MultipartBody.SHELL_SCRIPT, body=script))
    return multipart


class Inf2Server(Construct):
    """A DJL Serving model server on an inf2 instance, in `vpc_subnets` of `vpc`.

    :param vpc: the VPC; :param vpc_subnets: the (private) subnets of the instance.
    :param bundle: the DJL model bundle (``serving.properties`` and the handler, or the model).
    :param image: the DJL LMI neuronx image (``djl_neuronx(version)`` or your own).
    :param props: instance type, AMI, volume, port, ingress and load timeout.
    :param role: the instance's role (default: a new one; either way it gets the grants the host
        needs: SSM Session Manager, the bundle's object, the image, the server's logs).
    :param security_group: the instance's security group (default: a new one with no ingress but
        `props.ingress_cidr`'s and no egress but HTTPS; a given one gets those rules too).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        vpc_subnets: ec2.SubnetSelection,
        bundle: ModelAsset,
        image: ContainerImage,
        props: Inf2ServerProps,
        role: iam.IRole | None = None,
        security_group: ec2.ISecurityGroup | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self._props = props
        self.security_group = security_group or ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="DJL Serving on inf2: no ingress unless a CIDR is configured",
            allow_all_outbound=False,
        )
        allow_host_egress(self.security_group)
        if props.ingress_cidr is not None:
            self.security_group.add_ingress_rule(
                ec2.Peer.ipv4(props.ingress_cidr), ec2.Port.tcp(props.port), "DJL Serving HTTP from the configured CIDR"
            )
        self.log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
        )
        self.role: iam.IRole = role or iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="inf2 model server: SSM access, its bundle, its image, its logs",
        )
        grant_session_manager(self.role)
        bundle.grant_read_object(self.role)
        self.log_group.grant_write(self.role)
        # Not Metric.grant_put_metric_data, which allows every namespace: PutMetricData takes no
        # resource, so the namespace condition is what scopes it.
        iam.Grant.add_to_principal(
            grantee=self.role,
            actions=["cloudwatch:PutMetricData"],
            resource_arns=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": METRIC_NAMESPACE}},
        )
        self.image_uri: str = image.bind(self, self.role)

        script = render_user_data(
            {
                "BUNDLE_URL": bundle.s3_object_url,
                "BUNDLE_SHA256": bundle.sha256,
                "IMAGE_URI": self.image_uri,
                "REGION": stack.region,
                "LOG_GROUP": self.log_group.log_group_name,
                "PORT": str(props.port),
                "LOAD_TIMEOUT_S": str(props.load_timeout_s),
                # Without ingress only SSM port forwarding, which connects to the host's loopback,
                # reaches the server; with it, the security group decides who does.
                "PUBLISH_ADDRESS": LOOPBACK if props.ingress_cidr is None else ANY_ADDRESS,
                "NAMESPACE": METRIC_NAMESPACE,
                "PROBE_REQUEST": props.probe_request,
            }
        )
        # "Default": the instance keeps the logical id it had as a resource of the stack itself,
        # so that moving it into this construct replaces neither it nor its volume.
        self.instance = ec2.Instance(
            self,
            "Default",
            vpc=vpc,
            vpc_subnets=vpc_subnets,
            instance_type=ec2.InstanceType(props.instance_type),
            machine_image=ec2.MachineImage.from_ssm_parameter(
                props.ami_ssm_parameter, os=ec2.OperatingSystemType.LINUX
            ),
            user_data=user_data(script),
            role=self.role,
            security_group=self.security_group,
            require_imdsv2=True,
            detailed_monitoring=True,
            associate_public_ip_address=False,
            block_devices=[
                ec2.BlockDevice(
                    device_name=ROOT_DEVICE,
                    volume=ec2.BlockDeviceVolume.ebs(
                        props.volume_size_gb,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        encrypted=True,
                        delete_on_termination=True,
                    ),
                )
            ],
        )
        # The instance's name is the server's path, not its own (which ends in "Default").
        Tags.of(self.instance).add("Name", self.node.path)
        self._warn_about_the_ami(props.ami_ssm_parameter)
        self.recover_alarm = cloudwatch.Alarm(
            self,
            "SystemStatusAlarm",
            alarm_description="The instance failed its system status check: recover it onto healthy hardware",
            metric=self.metric_status_check_failed_system(),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=2,
        )
        self.recover_alarm.add_alarm_action(cw_actions.Ec2Action(cw_actions.Ec2InstanceAction.RECOVER))
        #: The server is down past its load time (see :meth:`_health_alarm`); no actions: the
        #: stack, or you, add them (``health_alarm.add_alarm_action``).
        self.health_alarm: cloudwatch.Alarm = self._health_alarm()
        self._acknowledge()

    def _warn_about_the_ami(self, parameter: str) -> None:
        published = NEURON_DLAMI_PARAMETERS.get(parameter)
        if published is not None and published.frozen_at is not None:
            Annotations.of(self.instance).add_warning_v2(
                "llm-inference:inf2-ami-frozen",
                f"ami_ssm_parameter={parameter!r} names the last image of a DLAMI AWS no longer updates (Neuron "
                f"{published.frozen_at}, driver {published.driver}): no fixes reach this host. Newer DLAMIs' drivers "
                "no longer run the Neuron runtime of the LMI image this recipe stands on (docs/IMAGES.md).",
            )
        elif "/latest/" in parameter:
            # CloudFormation resolves the parameter at every deploy: a new DLAMI would replace the
            # instance, its volume and compiled cache with it, on an unrelated change.
            Annotations.of(self.instance).add_warning_v2(
                "llm-inference:inf2-ami-latest",
                f"ami_ssm_parameter={parameter!r} follows the newest Neuron DLAMI: once AWS publishes one, the next "
                "deploy replaces this instance and its volume. To pin it, point it at a parameter of your own that "
                "holds the AMI id (docs/IMAGES.md: what is pinned and why).",
            )

    @property
    def instance_type(self) -> str:
        """The EC2 instance type, such as ``inf2.48xlarge``."""
        return self._props.instance_type

    @property
    def port(self) -> int:
        """The port DJL Serving listens on."""
        return self._props.port

    @property
    def instance_id(self) -> str:
        return self.instance.instance_id

    def metric(
        self, metric_name: str, *, statistic: str = "Average", namespace: str = "AWS/EC2", **options: Any
    ) -> cloudwatch.Metric:
        """A metric of the instance (dimension InstanceId): EC2's, or with `namespace`
        METRIC_NAMESPACE one the host publishes; per minute unless `options` say otherwise
        (detailed monitoring is on, and the host publishes every minute)."""
        options.setdefault("period", Duration.minutes(1))
        return cloudwatch.Metric(
            namespace=namespace,
            metric_name=metric_name,
            dimensions_map={"InstanceId": self.instance.instance_id},
            statistic=statistic,
            **options,
        )

    def metric_server_healthy(self, **options: Any) -> cloudwatch.Metric:
        """1 when DJL Serving answered ``/ping`` in a period, else 0 (maximum of the host's check
        every minute; 0 also while the model loads, and no data while the instance is stopped)."""
        return self.metric("ServerHealthy", **{"statistic": "Maximum", "namespace": METRIC_NAMESPACE, **options})

    def metric_invocation_latency(self, **options: Any) -> cloudwatch.Metric:
        """Milliseconds a one-token request (`props.probe_request`) takes, sent by the host every
        minute while the server is healthy (average)."""
        return self.metric("InvocationLatency", **{"namespace": METRIC_NAMESPACE, **options})

    def metric_neuroncore_utilization(self, **options: Any) -> cloudwatch.Metric:
        """NeuronCore utilization, percent, over every NeuronCore of the instance (average; the
        maximum is the busiest core's), from neuron-monitor."""
        return self.metric("NeuronCoreUtilization", **{"namespace": METRIC_NAMESPACE, **options})

    def metric_neuron_device_memory_used(self, **options: Any) -> cloudwatch.Metric:
        """Bytes of Neuron device memory the server holds (maximum), from neuron-monitor."""
        return self.metric(
            "NeuronDeviceMemoryUsed", **{"statistic": "Maximum", "namespace": METRIC_NAMESPACE, **options}
        )

    def dashboard_widgets(self) -> list[list[cloudwatch.IWidget]]:
        """Rows of dashboard widgets for this server: its health and a request's latency, the
        NeuronCores' use and device memory, the instance's CPU and status checks, the alarms'
        states, and a Logs Insights view of the server's recent errors."""
        name = self.node.id
        return [
            [
                cloudwatch.GraphWidget(
                    title=f"{name}: DJL Serving healthy (1) and a one-token request, ms",
                    left=[self.metric_server_healthy(label="healthy")],
                    left_y_axis=cloudwatch.YAxisProps(min=0, max=1),
                    right=[self.metric_invocation_latency(label="latency ms")],
                    width=12,
                ),
                cloudwatch.GraphWidget(
                    title=f"{name}: NeuronCore utilization, % (average and busiest), and device memory",
                    left=[
                        self.metric_neuroncore_utilization(label="average"),
                        self.metric_neuroncore_utilization(statistic="Maximum", label="busiest"),
                    ],
                    right=[self.metric_neuron_device_memory_used(label="device memory bytes")],
                    width=12,
                ),
            ],
            [
                cloudwatch.GraphWidget(
                    title=f"{name}: CPU, % and failed system status checks",
                    left=[self.metric_cpu_utilization(label="CPU")],
                    right=[self.metric_status_check_failed_system(label="status check failed")],
                    width=12,
                ),
                cloudwatch.AlarmStatusWidget(
                    title=f"{name}: alarms", alarms=[self.health_alarm, self.recover_alarm], width=12
                ),
            ],
            [
                cloudwatch.LogQueryWidget(
                    title=f"{name}: recent errors of the server and its bootstrap",
                    log_group_names=[self.log_group.log_group_name],
                    query_lines=[
                        "fields @timestamp, @logStream, @message",
                        "filter @message like /(?i)(error|exception|traceback|fatal|killed)/",
                        "sort @timestamp desc",
                        "limit 50",
                    ],
                    width=24,
                    height=8,
                )
            ],
        ]

    def _health_alarm(self) -> cloudwatch.Alarm:
        """ALARM when DJL Serving has not been healthy in any period of a window longer than its
        load may take (`props.load_timeout_s`, at least one period more).

        The host reports ServerHealthy every minute from the start of its bootstrap: 0 while it
        downloads, pulls and loads (at most the load time: then systemd restarts the server) and
        when a step fails, 1 once /ping answers. Missing data counts as breaching, but only once
        the host has reported: FILL(healthy, 0) fills the periods without a report with 0 when
        the alarm's query holds at least one report, and yields nothing when it holds none. So a
        new instance, before its first report, is not evaluated (missing: the state is kept,
        INSUFFICIENT_DATA at first), while a host that stops reporting (hung, stopped, lost its
        network or credentials) is down like one that reports 0. The alarm evaluates one period
        more than it needs breaching (M of M+1) so that its query still reaches the last report
        when the last M periods have none; past that the state is kept (IGNORE), not set back to
        OK by the absence of data. Plain BREACHING would be ALARM at creation: the periods before
        the instance existed are missing too."""
        period_s, periods = health_alarm_window(self._props.load_timeout_s)
        period = Duration.seconds(period_s)
        return cloudwatch.Alarm(
            self,
            "HealthAlarm",
            alarm_description=(
                f"DJL Serving has not answered /ping for {period_s * periods} s, longer than its load may take "
                f"({self._props.load_timeout_s} s), or the host stopped reporting: the server is down "
                "(journalctl -u djl-serving and -u djl-serving-health on the instance)"
            ),
            metric=cloudwatch.MathExpression(
                expression="FILL(healthy, 0)",
                using_metrics={"healthy": self.metric_server_healthy(period=period)},
                period=period,
                label="ServerHealthy, missing periods as 0",
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=periods + 1,
            datapoints_to_alarm=periods,
            treat_missing_data=cloudwatch.TreatMissingData.IGNORE,
        )

    def metric_status_check_failed_system(self, **options: Any) -> cloudwatch.Metric:
        """1 when the instance's hardware or host failed its status check (maximum)."""
        return self.metric("StatusCheckFailed_System", **{"statistic": "Maximum", **options})

    def metric_cpu_utilization(self, **options: Any) -> cloudwatch.Metric:
        """The instance's CPU use, percent (average)."""
        return self.metric("CPUUtilization", **options)

    def _acknowledge(self) -> None:
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "Only actions that define no resource type take '*': ecr:GetAuthorizationToken, Session "
            "Manager's ssm:UpdateInstanceInformation and ssmmessages channels, and cloudwatch:PutMetricData "
            "(conditioned on the host's namespace)",
        )
        acknowledge(
            self.instance,
            "AwsSolutions-EC29",
            "Termination protection would block `cdk destroy`; the system-status alarm recovers "
            "the instance and the compiled-graph cache survives on its volume",
        )
