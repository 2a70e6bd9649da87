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
    (``<workdir>/<stage>``); ``dirs``: explicit folders overriding that layout;
    ``model``: an existing model (train folder or model.json) for encode-shards."""

    corpus: tuple[str, ...] = ()
    workdir: str | Path | None = None
    dirs: dict[str, str] = field(default_factory=dict)
    model: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "corpus", tuple(str(p) for p in self.corpus))

    def stage_dir(self, stage: str) -> Path:
        if stage in self.dirs:
            return Path(self.dirs[stage])
        if self.workdir is None:
            from dwstok.errors import ConfigError

            raise ConfigError(f"no workdir given to find the '{stage}' output")
        return Path(self.workdir) / stage

    def upstream(self, stage: str, *, config=None, keys=None) -> tuple[Path, Manifest]:
        """The finished output folder of ``stage`` and its manifest, every output
        verified by its sha256.

        ``InputError`` names the command to run when it is missing or incomplete,
        ``ModelFileError`` a corrupted file. With ``config``, the config sections that
        shaped it (``keys``, default all of them, upstream stages' included) must be
        ``config``'s, else ``PatternMismatchError`` (``stages.lineage.check``).
        """
        d = self.stage_dir(stage)
        if config is None:
            return d, require(d, stage)
        from .lineage import check

        return d, require(d, stage, check=lambda m: check(stage, d, m.built_with, config, keys=keys))

    def require_corpus(self) -> tuple[str, ...]:
        if not self.corpus:
            from dwstok.errors import InputError

            raise InputError("no corpus given: pass --corpus PATH (or set corpus.paths in the config)")
        return self.corpus
