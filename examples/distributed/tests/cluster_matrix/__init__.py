"""The driver matrix across processes: loopback clusters of real processes (see table.py).

It reuses the single-process matrix (`examples/tests/driver_matrix`): its
model, hooks, records and observations.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
for _path in (os.path.join(_HERE, "..", "..", "..", "tests"), os.path.dirname(_HERE)):
    _path = os.path.normpath(_path)
    if _path not in sys.path:
        sys.path.insert(0, _path)
