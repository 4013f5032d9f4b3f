"""One CloudWatch dashboard for a stack's service, and its console URL."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct


class ServiceDashboard(Construct):
    """A CloudWatch dashboard of `rows` of widgets (from ``dashboard_widgets()`` of the
    constructs it shows), named by CloudFormation.

    :param rows: each a row of widgets, top to bottom.
    """

    def __init__(self, scope: Construct, construct_id: str, *, rows: Sequence[Sequence[cloudwatch.IWidget]]) -> None:
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", widgets=[list(row) for row in rows])

    @property
    def url(self) -> str:
        """The dashboard in the CloudWatch console of the stack's region."""
        region = Stack.of(self).region
        return (
            f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}"
            f"#dashboards:name={self.dashboard.dashboard_name}"
        )
