"""tiktoken plugin: dwstok exports become tiktoken encodings, by name.

tiktoken imports every module of the ``tiktoken_ext`` namespace package and reads its
``ENCODING_CONSTRUCTORS``. Point ``DWSTOK_TIKTOKEN_DIRS`` at export folders (or folders
holding them, ``os.pathsep``-separated) before tiktoken's first ``get_encoding``:

    DWSTOK_TIKTOKEN_DIRS=work/32.3/export python -c \
        "import tiktoken; print(tiktoken.get_encoding('dwslmtok-32.3').n_vocab)"

The name is ``export.tiktoken_name`` from the build config (default ``dwslmtok-<version>``).
"""

from dwstok.tiktoken_compat import plugin_constructors

ENCODING_CONSTRUCTORS = plugin_constructors()
