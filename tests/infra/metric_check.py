"""The synthesis check of every metric a template watches, graphs or scales on, against what
AWS publishes (llm_contracts/sagemaker_metrics.py for SageMaker endpoints, its EC2 table for
the inf2 host, and the host's own scripts for the metrics it puts itself).

`problems(template)` reads each alarm (single metric, metric math, PromQL), each metric of
each dashboard widget and each scaling policy's metric, ties its dimensions to the endpoint of
the template they name (its mode from the endpoint config and the inference component, its
instance type, its serving framework from the model's image and environment), and reports,
one line each: a metric the endpoint's mode does not publish on that kind of instance, other
dimensions than it is published with, a statistic its page does not list, and an alarm
threshold outside the values the metric takes on that instance type.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_contracts import sagemaker_metrics as catalog
from llm_inference_cdk.inf2.server import HOST_FILES, METRIC_NAMESPACE

#: Namespaces the SageMaker catalog covers.
SAGEMAKER_NAMESPACES = {catalog.INVOCATIONS_NAMESPACE, catalog.INSTANCE_NAMESPACE, catalog.COMPONENT_NAMESPACE}
#: The statistics a graph or alarm may name that are not extended statistics.
_DEFAULT_STAT = "Average"


@dataclass(frozen=True)
class Endpoint:
    logical_id: str
    mode: str
    instance_type: str
    framework: str | None
    component: str | None

    @property
    def kind(self) -> str:
        return catalog.kind(self.instance_type)


@dataclass(frozen=True)
class Use:
    """One metric as a template uses it."""

    where: str
    namespace: str
    name: str
    dimensions: dict[str, Any]
    statistic: str
    threshold: float | None = None
    comparison: str | None = None


def problems(template: dict[str, Any]) -> list[str]:
    """Every use of a metric in `template` that its publisher does not back, one line each."""
    resources = template.get("Resources", {})
    endpoints = _endpoints(resources)
    found: list[str] = []
    for use in [*_alarm_uses(resources), *_dashboard_uses(resources), *_scaling_uses(resources)]:
        found.extend(_check(use, endpoints))
    for logical_id, query in _promql_alarms(resources):
        found.extend(_check_promql(logical_id, query, endpoints))
    return found


# --- the endpoints of a template ---------------------------------------------------------------


def _getatt(value: Any) -> str | None:
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    return None


def _endpoints(resources: dict[str, Any]) -> dict[str, Endpoint]:
    """Each SageMaker endpoint by its logical id, and each inference component's name to its
    endpoint."""
    components = {
        _getatt(r["Properties"]["EndpointName"]): r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::SageMaker::InferenceComponent"
    }
    found: dict[str, Endpoint] = {}
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::SageMaker::Endpoint":
            continue
        config = resources[_getatt(resource["Properties"]["EndpointConfigName"]) or ""]["Properties"]
        (variant,) = config["ProductionVariants"]
        component = components.get(logical_id)
        mode = "inference-component" if component else "async" if "AsyncInferenceConfig" in config else "realtime"
        model_id = _getatt(component["Specification"]["ModelName"] if component else variant["ModelName"])
        container = resources[model_id or ""]["Properties"]["PrimaryContainer"]
        framework = "vllm" if _is_vllm(container) else None
        name = component["InferenceComponentName"] if component else None
        endpoint = Endpoint(logical_id, mode, variant["InstanceType"], framework, name)
        found[logical_id] = endpoint
        if name is not None:
            found[name] = endpoint
    return found


def _is_vllm(container: dict[str, Any]) -> bool:
    """AWS's vLLM image (its repository is ``vllm``), whose entrypoint reads SM_VLLM_* settings."""
    return "/vllm:" in json.dumps(container.get("Image")) or any(
        k.startswith("SM_VLLM_") for k in container.get("Environment", {})
    )


def _endpoint_of(dimensions: dict[str, Any], endpoints: dict[str, Endpoint]) -> Endpoint | None:
    for key in ("EndpointName", catalog.OTEL_ENDPOINT):
        if key in dimensions:
            return endpoints.get(_getatt(dimensions[key]) or "")
    for key in ("InferenceComponentName", catalog.OTEL_COMPONENT):
        if key in dimensions and isinstance(dimensions[key], str):
            return endpoints.get(dimensions[key])
    return None


# --- what the template uses --------------------------------------------------------------------


def _dimensions(listed: list[dict[str, Any]]) -> dict[str, Any]:
    return {d["Name"]: d["Value"] for d in listed}


def _alarm_uses(resources: dict[str, Any]) -> list[Use]:
    uses = []
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::CloudWatch::Alarm":
            continue
        p = resource["Properties"]
        where = f"alarm {logical_id}"
        if "MetricName" in p:
            uses.append(Use(where, p["Namespace"], p["MetricName"], _dimensions(p.get("Dimensions", [])),
                            p.get("Statistic") or p["ExtendedStatistic"], p.get("Threshold"),
                            p.get("ComparisonOperator")))  # fmt: skip
        returned = [q for q in p.get("Metrics", []) if q.get("ReturnData", True)]
        for query in p.get("Metrics", []):
            stat = query.get("MetricStat")
            if stat is None:
                continue
            m = stat["Metric"]
            # The threshold applies to the metric itself only when the alarm returns it as it is.
            alone = returned == [query]
            uses.append(Use(where, m["Namespace"], m["MetricName"], _dimensions(m.get("Dimensions", [])),
                            stat["Stat"], p.get("Threshold") if alone else None,
                            p.get("ComparisonOperator") if alone else None))  # fmt: skip
    return uses


def _promql_alarms(resources: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (logical_id, r["Properties"]["EvaluationCriteria"]["PromQLCriteria"]["Query"])
        for logical_id, r in resources.items()
        if r["Type"] == "AWS::CloudWatch::Alarm" and "EvaluationCriteria" in r["Properties"]
    ]


def _resolved_json(body: Any) -> Any:
    """A dashboard body, its CloudFormation tokens kept as the dicts they are."""
    if isinstance(body, str):
        return json.loads(body)
    tokens: list[Any] = []
    parts = []
    for part in body["Fn::Join"][1]:
        if isinstance(part, str):
            parts.append(part)
        else:
            parts.append(f"@@TOKEN{len(tokens)}@@")
            tokens.append(part)

    def back(value: Any) -> Any:
        if isinstance(value, str):
            match = re.fullmatch(r"@@TOKEN(\d+)@@", value)
            return tokens[int(match[1])] if match else value
        if isinstance(value, list):
            return [back(v) for v in value]
        if isinstance(value, dict):
            return {k: back(v) for k, v in value.items()}
        return value

    return back(json.loads("".join(parts)))


def _dashboard_uses(resources: dict[str, Any]) -> list[Use]:
    uses = []
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::CloudWatch::Dashboard":
            continue
        body = _resolved_json(resource["Properties"]["DashboardBody"])
        for widget in body["widgets"]:
            if widget["type"] != "metric":
                continue
            props = widget["properties"]
            where = f"dashboard {logical_id} widget {props.get('title')!r}"
            for line in props.get("metrics", []):
                options = line[-1] if line and isinstance(line[-1], dict) else {}
                fields = line[:-1] if options else line
                if not fields:  # a math expression: its inputs are lines of their own
                    continue
                namespace, name, *pairs = fields
                dimensions = dict(zip(pairs[::2], pairs[1::2], strict=True))
                uses.append(Use(where, namespace, name, dimensions,
                                options.get("stat", props.get("stat", _DEFAULT_STAT))))  # fmt: skip
    return uses


#: Application Auto Scaling's predefined SageMaker metrics: the metric each tracks, and how.
PREDEFINED = {
    "SageMakerVariantInvocationsPerInstance": ("InvocationsPerInstance", ("EndpointName", "VariantName"), "Sum"),
    "SageMakerInferenceComponentInvocationsPerCopy": ("InvocationsPerCopy", ("InferenceComponentName",), "Sum"),
    "SageMakerVariantConcurrentRequestsPerModelHighResolution": (
        "ConcurrentRequestsPerModel", ("EndpointName", "VariantName"), "Maximum",
    ),
    "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution": (
        "ConcurrentRequestsPerCopy", ("InferenceComponentName",), "Maximum",
    ),
}  # fmt: skip


def _scaling_uses(resources: dict[str, Any]) -> list[Use]:
    uses = []
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::ApplicationAutoScaling::ScalingPolicy":
            continue
        config = resource["Properties"].get("TargetTrackingScalingPolicyConfiguration")
        if config is None:  # step scaling: its alarm names the metric
            continue
        where = f"scaling policy {logical_id}"
        custom = config.get("CustomizedMetricSpecification")
        if custom is not None:
            uses.append(Use(where, custom["Namespace"], custom["MetricName"],
                            _dimensions(custom.get("Dimensions", [])), custom["Statistic"]))  # fmt: skip
            continue
        kind = config["PredefinedMetricSpecification"]["PredefinedMetricType"]
        if kind not in PREDEFINED:
            uses.append(Use(where, catalog.INVOCATIONS_NAMESPACE, kind, {}, ""))
            continue
        name, keys, stat = PREDEFINED[kind]
        target = resources[resource["Properties"]["ScalingTargetId"]["Ref"]]["Properties"]["ResourceId"]
        uses.append(Use(where, catalog.INVOCATIONS_NAMESPACE, name, _target_dimensions(target, keys), stat))
    return uses


def _target_dimensions(resource_id: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """The dimensions a scalable target's resource id (``endpoint/<name>/variant/<variant>`` or
    ``inference-component/<name>``) names."""
    if isinstance(resource_id, str):
        return {keys[0]: resource_id.split("/", 1)[1]}
    parts = resource_id["Fn::Join"][1]
    endpoint = next(p for p in parts if isinstance(p, dict))
    return {"EndpointName": endpoint, "VariantName": parts[-1].rsplit("/", 1)[-1]}


# --- the checks ----------------------------------------------------------------------------------


def _check(use: Use, endpoints: dict[str, Endpoint]) -> list[str]:
    what = f"{use.where}: {use.namespace} {use.name} {use.statistic}"
    if use.namespace == "AWS/EC2":
        return _check_table(use, what, EC2_METRICS)
    if use.namespace == METRIC_NAMESPACE:
        return _check_table(use, what, host_metrics())
    if use.namespace not in SAGEMAKER_NAMESPACES:
        return [f"{what}: no publisher this check knows of"]
    endpoint = _endpoint_of(use.dimensions, endpoints)
    if endpoint is None:
        return [f"{what}: its dimensions {use.dimensions} name no endpoint of this stack"]
    metric = catalog.find(use.namespace, use.name, set(use.dimensions), mode=endpoint.mode, kind_=endpoint.kind)
    if metric is None:
        reason = catalog.why_not(use.namespace, use.name, set(use.dimensions), mode=endpoint.mode, kind_=endpoint.kind)
        return [f"{what}: {reason}"]
    found = []
    if not metric.valid_statistic(use.statistic):
        found.append(f"{what}: {use.statistic} is not a statistic of {use.name} (its page lists "
                     f"{', '.join(sorted(metric.statistics))}: {metric.url})")  # fmt: skip
    if use.threshold is not None:
        found.extend(_range_problems(what, metric, use, catalog.value_range(metric, endpoint.instance_type),
                                     endpoint.instance_type))  # fmt: skip
    return found


def _range_problems(
    what: str, metric: catalog.PublishedMetric, use: Use, bounds: tuple[float, float | None], instance_type: str
) -> list[str]:
    """A threshold the statistic can never cross: outside the metric's values (for a Sum or a
    SampleCount, below zero only: they add up over the period)."""
    low, high = bounds
    threshold = float(use.threshold or 0)
    if use.statistic in ("Sum", "SampleCount"):
        high = None
    above = (use.comparison or "").startswith("Greater")
    if threshold < low or (high is not None and (threshold > high or (above and "Equal" not in (use.comparison or "")
                                                                      and threshold >= high))):  # fmt: skip
        shown = "no bound" if high is None else f"{high:g}"
        return [f"{what}: threshold {threshold:g} ({use.comparison}) is outside what {use.name} takes on "
                f"{instance_type}, {low:g} to {shown} ({metric.url})"]  # fmt: skip
    return []


def _check_table(use: Use, what: str, table: dict[str, tuple[frozenset[str], frozenset[str], str]]) -> list[str]:
    if use.name not in table:
        return [f"{what}: {use.namespace} publishes no {use.name} for this host"]
    dimensions, statistics, source = table[use.name]
    found = []
    if set(use.dimensions) != dimensions:
        found.append(f"{what}: published by {', '.join(sorted(dimensions))}, not {', '.join(sorted(use.dimensions))}")
    if use.statistic not in statistics:
        found.append(f"{what}: not one of {', '.join(sorted(statistics))} ({source})")
    return found


_PROMQL_METRIC = re.compile(r'__name__=~"([^"]+)"|([A-Za-z_:][A-Za-z0-9_:]*)\{')
_PROMQL_LABEL = re.compile(r"""'([a-z_.]+)'\s*=\s*"@@TOKEN(\d+)@@"|'([a-z_.]+)'\s*=\s*"([^"@]*)\"""")
_PROMQL_THRESHOLD = re.compile(r"\)\s*(>=|>|<=|<)\s*([0-9.]+)\s*$")


def _query_text(query: Any) -> tuple[str, list[Any]]:
    """A PromQL query as text, each CloudFormation token in it replaced by ``@@TOKEN<n>@@``."""
    if not isinstance(query, dict):
        return str(query), []
    tokens: list[Any] = []
    text = ""
    for part in query["Fn::Join"][1]:
        if isinstance(part, str):
            text += part
        else:
            text += f"@@TOKEN{len(tokens)}@@"
            tokens.append(part)
    return text, tokens


def _check_promql(logical_id: str, query: Any, endpoints: dict[str, Endpoint]) -> list[str]:
    """A PromQL alarm's query: the metric it selects is a detailed-observability metric of its
    endpoint's mode and serving framework, selected by the labels SageMaker gives it, with a
    threshold in its range."""
    text, tokens = _query_text(query)
    where = f"alarm {logical_id}: PromQL {text!r}"
    labels = {m[1] or m[3]: tokens[int(m[2])] if m[2] is not None else m[4] for m in _PROMQL_LABEL.finditer(text)}
    endpoint = _endpoint_of(labels, endpoints)
    if endpoint is None:
        return [f"{where}: its labels {labels} name no endpoint of this stack"]
    names = [m[1] or m[2] for m in _PROMQL_METRIC.finditer(text) if (m[1] or m[2]) not in ("by", "sum", "max", "min")]
    if not names:
        return [f"{where}: selects no metric this check can read"]
    published = [m for m in catalog.published(endpoint.mode, endpoint.kind, framework=endpoint.framework)
                 if m.namespace == catalog.OTEL]  # fmt: skip
    found = []
    for pattern in names:
        matched = [m for m in published if re.fullmatch(pattern, m.name) or re.fullmatch(pattern, _underscored(m))]
        if not matched:
            found.append(f"{where}: {pattern} is no detailed-observability metric of a {endpoint.mode} endpoint "
                         f"serving with {endpoint.framework} ({catalog.SOURCES['otel-metrics']})")  # fmt: skip
            continue
        unknown = set(labels) - set(matched[0].dimensions)
        if unknown:
            found.append(f"{where}: labels {sorted(unknown)} are not SageMaker's ({catalog.SOURCES['promql']})")
        found.extend(_promql_threshold(where, text, matched[0], endpoint.instance_type))
    return found


def _underscored(metric: catalog.PublishedMetric) -> str:
    # SageMaker's PromQL page writes vLLM's vllm:name as vllm_name.
    return metric.name.replace(":", "_")


def _promql_threshold(where: str, text: str, metric: catalog.PublishedMetric, instance_type: str) -> list[str]:
    threshold = _PROMQL_THRESHOLD.search(text)
    if threshold is None:
        return [f"{where}: no threshold (a comparison with a number closing the query)"]
    low, high = catalog.value_range(metric, instance_type)
    value = float(threshold[2])
    if value < low or (high is not None and value >= high):
        return [f"{where}: threshold {value:g} is outside {low:g} to {high} of {metric.name}"]
    return []


#: The EC2 metrics the inf2 host's alarms and dashboard use (EC2 User Guide, "Instance metrics"
#: and "Status check metrics": https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/viewing_metrics_with_cloudwatch.html),
#: per instance (detailed monitoring: every minute).
_EC2_PAGE = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/viewing_metrics_with_cloudwatch.html"
_ANY = frozenset({"Average", "Sum", "Minimum", "Maximum", "SampleCount"})
EC2_METRICS = {
    "CPUUtilization": (frozenset({"InstanceId"}), _ANY, _EC2_PAGE),
    "StatusCheckFailed_System": (frozenset({"InstanceId"}), _ANY, _EC2_PAGE),
}


def host_metrics() -> dict[str, tuple[frozenset[str], frozenset[str], str]]:
    """The metrics the inf2 host puts in its own namespace: each MetricName its scripts write,
    per InstanceId."""
    names: set[str] = set()
    for script in ("neuron_metrics.py", "health-check.sh"):
        text = (HOST_FILES / script).read_text()
        names |= set(re.findall(r'\\?"MetricName\\?":\s*\\?"([A-Za-z]+)', text))
    return {name: (frozenset({"InstanceId"}), _ANY, str(Path("llm_inference_cdk/inf2"))) for name in names}
