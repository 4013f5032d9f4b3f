"""SageMaker as the local AWS emulates it beyond moto's model, its state and behaviour (moto's
backends hold the API's resources; ``local_aws/patches/sagemaker.py`` and
``local_aws/patches/sagemakerruntime.py`` wire this package in):

* :mod:`.arns`: the ARNs SageMaker gives hosting resources;
* :mod:`.hosting`: what an endpoint config asks the runtime for, the model's access to its image
  and data, the data fetched from S3, how an update moves traffic, an endpoint's deploy;
* :mod:`.components`: inference components, their store and their deploy;
* :mod:`.described`: what the Describe calls answer where moto's description differs from AWS's shape;
* :mod:`.invocations`: InvokeEndpoint and InvokeEndpointWithResponseStream, routed to a container;
* :mod:`.async_inference`: InvokeEndpointAsync's queue, answers and notifications;
* :mod:`.errors`: SageMaker's errors (the runtime's ValidationError and AccessDeniedException as
  classes, ModelError and the 413 as answers, the API's AccessDeniedException);
* :mod:`.authorization`: whether an assumed role may invoke an endpoint;
* :mod:`.runtime`: the hosting runtime, which starts and stops the endpoints' containers, routes
  invocations to them and scales them;
* :mod:`.logs`: each container's output shipped to CloudWatch Logs as the model's role;
* :mod:`.containers`: the processes that run a model's image on this host, one class per image
  (``local_aws/sagemaker/lmi_container.py`` has DJL's LMI image).

The images' entrypoints (``hf_entrypoint.py``, ``vllm_entrypoint.py``, ``lmi_entrypoint.py``)
are in ``local_aws/images/``: the images' own interpreters run them by path, and they import
nothing of the project (docs/DEVELOPING.md, the layout of ``local_aws``).
"""
