"""``python -m stages.warm`` (run by ``make setup``): pretokenize's kernels compile there
with the types a build gives them, so the first build after setup compiles none."""

from tests.stages.conftest import fresh_process

SAME_TYPES = """
import sys
from pathlib import Path
from stages import Inputs, pretokenize, warm
from stages.executors import LocalExecutor
from stages.piece_counts import _count_pieces, _rehash
from stages.pretokenize import _cap_pieces, _sum_wide_chars
from tests.stages.conftest import config

warm.warm()
kernels = (_sum_wide_chars, _cap_pieces, _count_pieces, _rehash)
first = [set(k.signatures) for k in kernels]
work = Path(sys.argv[2])
cfg = config(pretokenize={"max_piece_bytes": 8})  # pieces over 8 bytes are cut: _cap_pieces runs
m = pretokenize.run(cfg, Inputs(corpus=[sys.argv[1]], workdir=work), work / pretokenize.STAGE, LocalExecutor(2))
print(*map(len, first), [set(k.signatures) for k in kernels] == first, m.counts["long_pieces"] > 0)
"""


def test_the_warm_run_compiles_pretokenizes_kernels_with_a_builds_types(tmp_path, small_parquet):
    # The build below cuts long pieces, counts pieces and sums Han characters; had the
    # warm run given any of these kernels other types (a writable buffer, int32
    # offsets), the build would have added a signature.
    assert fresh_process(SAME_TYPES, str(small_parquet), str(tmp_path / "w")) == ["1", "1", "1", "1", "True", "True"]
