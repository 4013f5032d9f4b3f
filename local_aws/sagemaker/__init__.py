"""SageMaker as the local AWS emulates it beyond moto's model, its state and behaviour (moto's
backends hold the API's resources; ``local_aws/patches/sagemaker.py`` and
``local_aws/patches/sagemakerruntime.py`` wire this package in):

* :mod:`.arns`: the ARNs SageMaker gives hosting resources;
* :mod:`.components`: inference components and their store;
* :mod:`.invocations`: InvokeEndpoint and InvokeEndpointWithResponseStream, routed to a container;
* :mod:`.async_inference`: InvokeEndpointAsync's queue, answers and notifications;
* :mod:`.errors`: the runtime's error answers (ModelError, ValidationError, 413, AccessDenied).

The hosting runtime that starts and stops the endpoints' containers is ``local_aws/runtime.py``
and ``local_aws/containers.py`` (docs/DEVELOPING.md, the layout of ``local_aws``).
"""
