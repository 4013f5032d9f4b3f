"""gunicorn's entry point (``wsgi:app``), as in the SageMaker sample container."""

from serving.gpt2.predictor import create_app

app = create_app()
