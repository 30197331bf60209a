from . import backbones, layers  # noqa: F401  (registers the modules)
