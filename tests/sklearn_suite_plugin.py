"""pytest plugin: scikit-learn's own SpectralClustering tests, with that name bound to ABCClustering.

Used by ``tests/test_sklearn_spectral_suite.py``, which runs the installed
``sklearn/cluster/tests/test_spectral.py`` in a subprocess with ``-p`` this
module.  The tests look ``SpectralClustering`` up in their module's globals
when they run, so rebinding it after collection is all it takes; nothing of
scikit-learn's test code is copied.
"""

from __future__ import annotations

import pytest

from skabc import ABCClustering


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and getattr(module, "SpectralClustering", None) is not None:
            module.SpectralClustering = ABCClustering
