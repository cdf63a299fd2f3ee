"""wex dtypes (the safetensors spellings of sdk/include/wex/abi.h) and
torch's. torch is imported only when a torch dtype is asked for."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# WEX_DTYPE_* -> name
NAMES = {1: "BF16", 2: "F16", 3: "F32", 4: "F64", 5: "F8_E4M3", 6: "F8_E5M2",
         7: "I8", 8: "U8", 9: "I32", 10: "I64"}
_TORCH = {"BF16": "bfloat16", "F16": "float16", "F32": "float32",
          "F64": "float64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
          "I8": "int8", "U8": "uint8", "I32": "int32", "I64": "int64"}


def torch_dtype(name: str) -> torch.dtype | None:
    """The torch dtype of wex dtype `name` ("BF16" -> torch.bfloat16); None
    when this torch has no such dtype (float8 on an old torch)."""
    import torch
    dtype: torch.dtype | None = getattr(torch, _TORCH[name], None)
    return dtype


def name_of(torch_dtype_value: torch.dtype) -> str | None:
    """The wex dtype name of a torch dtype, None when wex has none."""
    for name, attr in _TORCH.items():
        import torch
        if getattr(torch, attr, None) == torch_dtype_value:
            return name
    return None
