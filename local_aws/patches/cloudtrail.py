"""CloudTrail: LookupEvents, which the CDK CLI calls when a deployment fails."""

from __future__ import annotations

import json
from typing import Any

from moto.cloudtrail.responses import CloudTrailResponse

from local_aws.patches.base import patch, replace


@patch(
    """LookupEvents answers, with the events CloudTrail recorded: none here, as in an account
    whose API calls no trail records. The CDK CLI looks up who made a failed deployment's
    calls. Stock moto has no such action and answers HTTP 500, which the CLI prints as a stack
    trace beside the deployment's real error."""
)
def lookup_events_answers() -> None:
    def lookup_events(self: Any) -> str:
        return json.dumps({"Events": []})

    replace(CloudTrailResponse, "lookup_events", lookup_events)
