"""The CDK stacks, their shared constructs and the configuration they are built from."""
