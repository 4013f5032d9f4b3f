"""A load tester for any SageMaker endpoint: closed-loop clients per concurrency level through
boto3's InvokeEndpoint, the client's figures beside the endpoint's own from CloudWatch, written
as JSON, a Markdown table and a plot (``python -m loadtest --help``; docs/LOADTEST.md).

Modules: :mod:`loadtest.request` (the request file), :mod:`loadtest.invokers` (what one request
is: InvokeEndpoint now, another invoker for asynchronous endpoints), :mod:`loadtest.runner` (the
closed loop), :mod:`loadtest.stats` (percentiles, kinds of error), :mod:`loadtest.metrics`
(CloudWatch), :mod:`loadtest.report` (the files), :mod:`loadtest.cli`.
"""
