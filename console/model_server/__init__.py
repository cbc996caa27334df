"""`diagnose demo model-server`: a local OpenAI-compatible server for one of the models shipped on PyPI."""
