"""The GPT-2 serving container: nginx + gunicorn + a dynamically batching predictor.

In the image this folder lies at ``/opt/program/serving/gpt2`` so that the modules import
as the package ``serving.gpt2`` both there and in the repository (the builder reuses the
backends for its parity gate). Importing the package is cheap: torch, onnxruntime and
tensorrt are imported only by the backend that needs them.
"""
