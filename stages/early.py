"""Loading the Numba kernels of a run's stages on a thread of their own, while the stages
before them run.

Numba loads a compiled kernel from its disk cache on the kernel's first call in a
process: about 50 ms for the scanner and as much for the merge learner, most of it
holding the GIL, while a CPU is idle (a shard's threads wait for the scanner; the train
stage is the learner). A stage that has kernels defines ``load_kernels(config,
executor)``, which calls them on a tiny input with the types its ``run`` gives them.
:class:`EarlyLoads` calls each stage's when the stage before it starts (the first
stage's at once): a load that holds the GIL during a stage of busy threads (the learner's
during pretokenize) slowed that stage by more than it saved.

Only when the kernels are compiled (``dwstok.kernel_cache.state()`` is ``ready``): on a
cold cache a compile of minutes on this thread would compete with the background
compile that the first stage starts. A kernel that fails here is left alone: the
stage's own call raises what is wrong.

>>> loads = EarlyLoads.start([], None, None)
>>> loads.stage_started(0); loads.join()
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any


class EarlyLoads:
    """The kernels of ``stages`` (CLI names, in run order), each stage's loaded on a
    daemon thread once the stage before it has started."""

    def __init__(self, loads: list[tuple[int, Any]], config: Any, executor: Any):
        self._loads = loads  # (stage index, its load_kernels)
        self._config, self._executor = config, executor
        self._started = threading.Condition()
        self._stage = -1  # the last stage started
        self._thread: threading.Thread | None = None

    @classmethod
    def start(cls, stages: Sequence[str], config: Any, executor: Any) -> EarlyLoads:
        """Start loading (nothing when no stage has kernels, or they are not compiled)."""
        import importlib

        from . import module_name

        loads = [(i, getattr(importlib.import_module(module_name(s)), "load_kernels", None)) for i, s in enumerate(stages)]
        self = cls([(i, f) for i, f in loads if f is not None], config, executor)
        if self._loads and _compiled():  # (not asked otherwise: count alone imports no Numba)
            self.begin()
        return self

    def begin(self) -> None:
        """Start the thread (none when there is nothing to load)."""
        if self._loads:
            self._thread = threading.Thread(target=self._run, name="dwstok-load-kernels", daemon=True)
            self._thread.start()

    def stage_started(self, index: int) -> None:
        """Stage ``index`` has started: the next stage's kernels may load."""
        with self._started:
            self._stage = index
            self._started.notify_all()

    def join(self, timeout: float | None = 10.0) -> None:
        """Stop loading further stages' kernels; wait for the one loading (a thread still
        inside Numba when the interpreter ends could crash it)."""
        with self._started:  # (both at once: a thread woken between them would load one more)
            self._loads = []
            self._stage = 1 << 30
            self._started.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        i = 0
        while True:
            with self._started:
                if i >= len(self._loads):
                    return
                stage, load = self._loads[i]
                while self._stage < stage - 1:
                    self._started.wait()
                if not self._loads:  # joined meanwhile
                    return
            try:
                load(self._config, self._executor)
            except Exception:  # noqa: BLE001 - the stage's own call reports it
                return
            i += 1


def _compiled() -> bool:
    import numba

    from dwstok import kernel_cache

    return not numba.config.DISABLE_JIT and kernel_cache.state() == "ready"
