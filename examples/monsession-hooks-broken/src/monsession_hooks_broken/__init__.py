"""monsession-hooks-broken: a plugin that fails to load, on purpose.

The package itself imports fine; its plugin module (`._plugin`, the entry
point ``broken`` of the ``monsession`` group) does not, like a plugin whose
optional dependency is missing. The tests of monsession-hooks-earlystop
install it to prove that such a plugin never takes a training run down.
"""

__version__ = "0.1.0"
