"""The core-ATen converters, one module per op family; importing this package registers them
(kiln.dynamo.registry)."""
from . import movement, nn, pointwise  # noqa: F401
