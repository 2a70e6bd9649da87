"""Loading a stage's kernels on a spare CPU while the stage reads its input.

A kernel's first call in a process loads it from Numba's disk cache (or, on a first
run, compiles it), and the call waits for that. Most of the loading is LLVM's work,
outside the GIL, as is Arrow's reading: started first, on a thread of its own, the
load overlaps the reading instead of following it.

>>> import time
>>> with loading_ahead(time.sleep, 0.01):
...     pass  # read the input here; the kernel's first call then finds it loaded
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator


@contextmanager
def loading_ahead(load: Callable[..., Any], *args: Any) -> Iterator[None]:
    """Run ``load(*args)`` on a thread of its own during the body, and wait for it after
    the body, an error included: no compile is left running as the process ends.

    What ``load`` raises is dropped: the stage meets the same error, and reports it,
    where it calls the kernel.
    """

    def target() -> None:
        try:
            load(*args)
        except Exception:  # noqa: BLE001 - met again, and reported, by the stage itself
            pass

    t = threading.Thread(target=target, name="dwstok-load-kernel", daemon=True)
    t.start()
    try:
        yield
    finally:
        t.join()
