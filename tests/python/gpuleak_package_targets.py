"""Functions that test_gpuleak_package.py runs through gpuleak.isolated: they must be importable by
name in the child, so they live in a module of their own."""

import ctypes
import os
import signal


def double(value, *, plus=0):
    return 2 * value + plus


def describe_process():
    return {"pid": os.getpid(), "ld_preload": os.environ.get("LD_PRELOAD")}


def fail(message):
    raise ValueError(message)


class TwoArgumentError(Exception):
    """Pickle rebuilds an exception from its args: this one cannot come back as itself."""

    def __init__(self, code, detail):
        super().__init__("code %d" % code)
        self.detail = detail


def fail_unpicklably():
    raise TwoArgumentError(7, "detail")


def return_unpicklable():
    return lambda: None


def kill_self():
    os.kill(os.getpid(), signal.SIGKILL)


def exit_hard(status):
    os._exit(status)


def cudart():
    return ctypes.CDLL(os.path.join(os.environ["GPULEAK_TEST_SIMDEVICE_DIR"], "libcudart.so.13"))


def leak(size):
    """cudaMalloc on the simulated device, never freed: returns the device address."""
    runtime = cudart()
    runtime.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    runtime.cudaMalloc.restype = ctypes.c_int
    pointer = ctypes.c_void_p()
    status = runtime.cudaMalloc(ctypes.byref(pointer), size)
    if status != 0:
        raise RuntimeError("cudaMalloc(%d) failed with %d" % (size, status))
    return pointer.value


class DeviceArray:
    """A device array as CuPy's and Numba's are seen from outside: its class says where its data is
    (``__cuda_array_interface__``); made with cudaMalloc on the simulated device, never freed."""

    def __init__(self, size):
        self.size = size
        self.address = leak(size)

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.size,), "typestr": "|u1", "data": (self.address, False), "version": 3}


class CompiledArrayInterface:
    """What a compiled class (CuPy's ndarray, a Cython class) has in its namespace for a property: a
    descriptor that is not a ``property``."""

    def __get__(self, array, owner=None):
        return {"shape": (array.size,), "typestr": "|u1", "data": (array.address, False), "version": 3}


class CompiledDeviceArray:
    __cuda_array_interface__ = CompiledArrayInterface()

    def __init__(self, size):
        self.size = size
        self.address = leak(size)


class Hostile(list):
    """A program's list that no reader of it may call into: its length, its class and its items' order."""

    def __len__(self):
        raise AssertionError("len() of the program's list was called")

    def __iter__(self):
        raise AssertionError("iter() of the program's list was called")

    @property
    def __class__(self):
        raise AssertionError("__class__ of the program's list was read")


class HostileKey:
    def __repr__(self):
        raise AssertionError("repr() of the program's key was called")

    def __eq__(self, other):
        raise AssertionError("== of the program's key was called")

    __hash__ = object.__hash__
