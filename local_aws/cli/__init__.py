"""What a person (or a test) drives the local AWS with, apart from the server itself
(local_aws/server.py, ``python -m local_aws``): the CDK CLI pointed at it (:mod:`.cdk`) and
`make demo`'s walk through the recipes (:mod:`.demo`, ``python -m local_aws.cli.demo``)."""
