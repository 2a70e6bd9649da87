"""What a stage reads: the corpus paths and the finished outputs of earlier stages.

>>> inp = Inputs(corpus=("data/",), workdir="work")
>>> inp.stage_dir("count")
PosixPath('work/count')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .manifest import Manifest, require


@dataclass(frozen=True)
class Inputs:
    """``corpus``: files/folders of documents; ``workdir``: where stage folders live
    (``<workdir>/<stage>``); ``dirs``: explicit folders overriding that layout."""

    corpus: tuple[str, ...] = ()
    workdir: str | Path | None = None
    dirs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "corpus", tuple(str(p) for p in self.corpus))

    def stage_dir(self, stage: str) -> Path:
        if stage in self.dirs:
            return Path(self.dirs[stage])
        if self.workdir is None:
            from dwstok.errors import ConfigError

            raise ConfigError(f"no workdir given to find the '{stage}' output")
        return Path(self.workdir) / stage

    def upstream(self, stage: str) -> tuple[Path, Manifest]:
        """The finished output folder of ``stage`` and its manifest; ``InputError``
        naming the command to run when it is missing or incomplete."""
        d = self.stage_dir(stage)
        return d, require(d, stage)

    def require_corpus(self) -> tuple[str, ...]:
        if not self.corpus:
            from dwstok.errors import InputError

            raise InputError("no corpus given: pass --corpus PATH (or set corpus.paths in the config)")
        return self.corpus
