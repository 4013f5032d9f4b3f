"""CloudFormation's engine where moto's differs from AWS's: change sets (:mod:`.change_sets`), the
order a template is worked in (:mod:`.ordering`), updates that replace and roll back
(:mod:`.updates`), what a stack lists (:mod:`.stacks`). ``local_aws/patches/cloudformation.py``
wires it into moto; Lambda-backed custom resources are local_aws/awslambda's."""
