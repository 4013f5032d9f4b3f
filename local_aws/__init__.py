"""A local AWS on 127.0.0.1 for `cdk bootstrap`, `cdk deploy` and `cdk destroy` without an account.

moto in server mode, in this process, with the patches of :mod:`local_aws.patches` that
make its CloudFormation behave as AWS does for this project's stacks.
"""

from local_aws.server import EMULATOR_ACCOUNT, LocalAws, UnsupportedMotoVersion

__all__ = ["EMULATOR_ACCOUNT", "LocalAws", "UnsupportedMotoVersion"]
