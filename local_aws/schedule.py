"""What the services do on the clock's schedule rather than on a request: CloudWatch evaluates
its alarms every 10 s (the finest period a high-resolution alarm has), and SageMaker publishes
its per-minute metrics (each instance's use, each idle variant's zero invocations, each
asynchronous endpoint's queue). A job whose patch is reverted does nothing: each reads its
service's wiring."""

from __future__ import annotations

from local_aws.clock import Job
from local_aws.cloudwatch.alarms import evaluate_alarms
from local_aws.sagemaker.metrics import publish_minute

JOBS = (Job("CloudWatch alarms", 10, evaluate_alarms), Job("SageMaker metrics", 60, publish_minute))
