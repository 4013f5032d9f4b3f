"""What AWS refuses in a request, checked as AWS checks it, and what AWS answers, by concern:

* :mod:`.documented`: the constraints AWS documents for the values these stacks send that
  botocore's model does not carry, each with its source;
* :mod:`.model`: a request checked against botocore's model of the service, then against the
  documented constraints, refused with the error and message the service answers;
* :mod:`.cloudformation`: a CloudFormation resource as the requests CloudFormation makes for it,
  and a synthesized template's literal values checked through them;
* :mod:`.answers`: an answer checked against botocore's model of its operation's output, read as it
  was sent (the local AWS's own answers: ``local_aws.patches.protocol`` keeps one that breaks it
  as a fault);
* :mod:`.base`: what they share (the refusal, a member's path, the unresolved value).

Shared by the local AWS (its patch ``local_aws.patches.inputs`` answers a refused request with
AWS's error, and fails a CloudFormation resource with it) and by the synthesis tests, which run
the same checks on every literal value of the synthesized templates.
"""
