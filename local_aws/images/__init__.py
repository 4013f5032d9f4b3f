"""What the images' own interpreters run by path (``.venv-hf``, ``.venv-vllm``, ``.venv-lmi``):
the images' entrypoints as the local AWS starts them, and the LMI image's DJL and
transformers-neuronx stand-ins. These interpreters have none of the project's packages, so
nothing here imports the project (tests/test_imports.py); the local AWS's container classes
(local_aws/sagemaker/containers.py, lmi_container.py) name these files by path."""
