"""Where TensorFlow's tensors and variables keep their data on the device. They expose no
``__cuda_array_interface__``, but a tensor on a GPU exports itself through DLPack without a copy, and the
capsule holds the address of its data (``DLTensor.data``, the first field of ``DLManagedTensor``). A
variable's data is read as a tensor first (``ReadVariableOp``, which hands out the variable's own buffer).
Exporting and reading run TensorFlow's code, not the program's; nothing is imported: without TensorFlow
loaded there is nothing to read.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Optional

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

# The dtypes TensorFlow's DLPack export has a code for. It must not be asked about any other: a string,
# resource or variant tensor makes it abort the process (a failed check in Tensor::tensor_data), where
# Python could catch nothing.
_EXPORTABLE = frozenset(
    ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    + ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
)


class TensorFlowData:
    """The classes of TensorFlow's that hold device memory, and the address of what one holds."""

    def __init__(self) -> None:
        ops = sys.modules.get("tensorflow.python.framework.ops")
        variables = sys.modules.get("tensorflow.python.ops.resource_variable_ops")
        dlpack = sys.modules.get("tensorflow.python.dlpack.dlpack")
        self.tensor = getattr(ops, "EagerTensor", None)
        self.variable = getattr(variables, "BaseResourceVariable", None)
        self.to_dlpack = getattr(dlpack, "to_dlpack", None)

    def holds(self, kind: type) -> bool:
        if self.to_dlpack is None:
            return False
        return any(cls is not None and issubclass(kind, cls) for cls in (self.tensor, self.variable))

    def address(self, value) -> Optional[int]:
        """The device address of the data of a tensor or variable on a GPU; None elsewhere, or where
        TensorFlow would not say."""
        try:
            tensor = value.value() if self.variable is not None and isinstance(value, self.variable) else value
            if "GPU" not in tensor.device or tensor.dtype.name not in _EXPORTABLE:
                return None
            capsule = self.to_dlpack(tensor)
            managed = _capsule_pointer(capsule, b"dltensor")
            return ctypes.c_void_p.from_address(managed).value if managed else None
        except Exception:  # an uninitialized variable: nothing to place
            return None
