"""Model adapters. Built-ins register lazily here (module imported on first use); other packages
register through the ``cafe.adapters`` entry-point group."""

from cafe.adapters.base import ADAPTERS, Adapter, ModelCard

# name -> "module:Class"; heavy engines import only when their adapter is asked for
for _name, _target in {
    "reference": "cafe.adapters.reference:ReferenceAdapter",
    "random": "cafe.adapters.random_baseline:RandomAdapter",
}.items():
    ADAPTERS.add_lazy(_name, _target)

__all__ = ["ADAPTERS", "Adapter", "ModelCard"]
