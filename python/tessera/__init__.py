"""tessera: every checkpoint format into NumPy, without torch.

    import tessera
    arrays = tessera.load("pytorch_model.bin")        # name -> numpy.ndarray
    with tessera.open("model.safetensors") as ckpt:  # reads only the index
        emb = ckpt.load_rows("embed.weight", 0, 1024)
    tessera.save(arrays, "model.safetensors")
    t = torch.from_dlpack(ckpt.tensor("lm_head.weight"))  # DLPack, any dtype

The NEP 49 handler (NumPy's array data from tessera's allocator) is
tessera.numpy_allocator; `pip install` also installs the `tessera` command.

Every call is a thin layer over tessera's C library (docs/PYTHON.md says
which C call each one is); the library ships in this package.
"""

from ._api import SKIPPED_KEY, Checkpoint, LoadedDict, load, open, save
from ._dlpack import Tensor
from ._lib import (
    TesseraCancelled,
    TesseraError,
    TesseraFormatError,
    TesseraIOError,
    TesseraMemoryError,
    TesseraValueError,
    ffi,
    lib,
)

__version__ = ffi.string(lib.tsr_version()).decode()

__all__ = [
    "load", "open", "save", "Checkpoint", "LoadedDict", "SKIPPED_KEY", "Tensor",
    "TesseraError", "TesseraIOError", "TesseraFormatError", "TesseraValueError",
    "TesseraMemoryError", "TesseraCancelled", "__version__",
]
