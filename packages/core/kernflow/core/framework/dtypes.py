"""Tensor element types (``kf.float32``, ``kf.int32``, ...).

Each :class:`DType` is an interned singleton identified by its ``DataType``
enum value (the same numbering TensorFlow uses); reference ("_ref") types
use ``enum + 100``.

The quantized types (``qint8``, ``quint8``, ``qint16``, ``quint16``, ``qint32``) hold integers
that quantization ops pair with a float range. As in TensorFlow, their ``as_numpy_dtype`` is a
one-field numpy structured dtype wrapping the integer type (``[("qint8", "i1")]``): an array of
them is told apart from a plain int8 array, so feeds, fetches, TensorProtos and checkpoints keep
the quantized type, while reshapes, concatenation and gathers work on them unchanged.
"""

from __future__ import annotations

import builtins

import numpy as np

__all__ = [
    "DType", "as_dtype", "dtype_from_numpy", "result_dtype_for_python_value",
    "DT_INVALID", "DT_FLOAT", "DT_DOUBLE", "DT_INT32", "DT_UINT8",
    "DT_INT16", "DT_INT8", "DT_STRING", "DT_COMPLEX64", "DT_INT64",
    "DT_BOOL", "DT_UINT16", "DT_COMPLEX128", "DT_HALF", "DT_RESOURCE",
    "DT_VARIANT", "DT_UINT32", "DT_UINT64", "DT_QINT8", "DT_QUINT8", "DT_QINT16",
    "DT_QUINT16", "DT_QINT32", "REF_OFFSET", "QUANTIZED_DTYPES",
    "float16", "half", "float32", "float64", "double", "int8", "int16",
    "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
    "string", "complex64", "complex128", "resource", "variant", "qint8", "quint8",
    "qint16", "quint16", "qint32",
    "float16_ref", "half_ref", "float32_ref", "float64_ref", "double_ref",
    "int8_ref", "int16_ref", "int32_ref", "int64_ref", "uint8_ref",
    "uint16_ref", "uint32_ref", "uint64_ref", "bool_ref", "string_ref",
    "complex64_ref", "complex128_ref", "resource_ref", "variant_ref", "qint8_ref",
    "quint8_ref", "qint16_ref", "quint16_ref", "qint32_ref",
]

DT_INVALID = 0
DT_FLOAT = 1
DT_DOUBLE = 2
DT_INT32 = 3
DT_UINT8 = 4
DT_INT16 = 5
DT_INT8 = 6
DT_STRING = 7
DT_COMPLEX64 = 8
DT_INT64 = 9
DT_BOOL = 10
DT_QINT8 = 11
DT_QUINT8 = 12
DT_QINT32 = 13
DT_QINT16 = 15
DT_QUINT16 = 16
DT_UINT16 = 17
DT_COMPLEX128 = 18
DT_HALF = 19
DT_RESOURCE = 20
DT_VARIANT = 21
DT_UINT32 = 22
DT_UINT64 = 23

REF_OFFSET = 100

# enum -> (name, numpy scalar type)
_BASE_TYPES = {
    DT_FLOAT: ("float32", np.float32),
    DT_DOUBLE: ("float64", np.float64),
    DT_INT32: ("int32", np.int32),
    DT_UINT8: ("uint8", np.uint8),
    DT_INT16: ("int16", np.int16),
    DT_INT8: ("int8", np.int8),
    DT_STRING: ("string", np.object_),
    DT_COMPLEX64: ("complex64", np.complex64),
    DT_INT64: ("int64", np.int64),
    DT_BOOL: ("bool", np.bool_),
    DT_UINT16: ("uint16", np.uint16),
    DT_COMPLEX128: ("complex128", np.complex128),
    DT_HALF: ("float16", np.float16),
    DT_RESOURCE: ("resource", np.object_),
    DT_VARIANT: ("variant", np.object_),
    DT_UINT32: ("uint32", np.uint32),
    DT_UINT64: ("uint64", np.uint64),
}
# Quantized types: a numpy structured dtype of one field, named after the type, as TF's.
_QUANTIZED_STORAGE = {DT_QINT8: ("qint8", np.int8), DT_QUINT8: ("quint8", np.uint8),
                      DT_QINT16: ("qint16", np.int16), DT_QUINT16: ("quint16", np.uint16),
                      DT_QINT32: ("qint32", np.int32)}
_BASE_TYPES.update({e: (n, np.dtype([(n, t)])) for e, (n, t) in _QUANTIZED_STORAGE.items()})

_FLOATING = frozenset({DT_HALF, DT_FLOAT, DT_DOUBLE})
_SIGNED_INT = frozenset({DT_INT8, DT_INT16, DT_INT32, DT_INT64})
_UNSIGNED_INT = frozenset({DT_UINT8, DT_UINT16, DT_UINT32, DT_UINT64})
_COMPLEX = frozenset({DT_COMPLEX64, DT_COMPLEX128})
_NUMPY_INCOMPATIBLE = frozenset({DT_RESOURCE, DT_VARIANT})
_QUANTIZED = frozenset(_QUANTIZED_STORAGE)
_NO_LIMITS = frozenset({DT_STRING, DT_RESOURCE, DT_VARIANT} | _COMPLEX | _QUANTIZED)

_INTERNED = {}


def _is_valid_enum(type_enum):
    base = type_enum - REF_OFFSET if type_enum > REF_OFFSET else type_enum
    return base in _BASE_TYPES


class DType:
    """An immutable, interned description of a tensor element type.

    ``DType(enum)`` returns the shared instance for that ``DataType`` enum.
    Instances compare equal to other DTypes with the same enum and to any
    value :func:`as_dtype` maps to the same type (``kf.float32 ==
    "float32"``, ``kf.float32 == np.float32``).
    """

    __slots__ = ("_type_enum",)

    def __new__(cls, type_enum):
        """Returns the interned DType for ``type_enum``.

        Args:
            type_enum: A ``DataType`` enum value (``+100`` for ref types).

        Raises:
            TypeError: If ``type_enum`` is not a supported enum value.
        """
        if isinstance(type_enum, DType):
            return type_enum
        try:
            type_enum = int(type_enum)
        except (TypeError, ValueError):
            raise TypeError(
                f"type_enum must be an int, got {type_enum!r}") from None
        existing = _INTERNED.get(type_enum)
        if existing is not None:
            return existing
        if not _is_valid_enum(type_enum):
            raise TypeError(f"Unsupported DataType enum value: {type_enum}")
        obj = super().__new__(cls)
        object.__setattr__(obj, "_type_enum", type_enum)
        _INTERNED[type_enum] = obj
        return obj

    def __setattr__(self, name, value):
        raise AttributeError("DType objects are immutable")

    def __delattr__(self, name):
        raise AttributeError("DType objects are immutable")

    # --- identity -------------------------------------------------------

    @property
    def as_datatype_enum(self):
        """The ``DataType`` enum value of this type."""
        return self._type_enum

    @property
    def _base_enum(self):
        e = self._type_enum
        return e - REF_OFFSET if e > REF_OFFSET else e

    @property
    def name(self):
        """The type name, e.g. ``"float32"`` or ``"float32_ref"``."""
        base_name = _BASE_TYPES[self._base_enum][0]
        return base_name + "_ref" if self.is_ref_dtype else base_name

    @property
    def is_ref_dtype(self):
        """True if this is a reference type."""
        return self._type_enum > REF_OFFSET

    @property
    def base_dtype(self):
        """The non-reference version of this type."""
        return DType(self._base_enum)

    @property
    def _as_ref(self):
        """The reference version of this type."""
        return DType(self._base_enum + REF_OFFSET)

    def as_ref(self):
        """Returns the reference version of this type."""
        return self._as_ref

    @property
    def real_dtype(self):
        """The real part type for complex types, else the base type."""
        base = self._base_enum
        if base == DT_COMPLEX64:
            return DType(DT_FLOAT)
        if base == DT_COMPLEX128:
            return DType(DT_DOUBLE)
        return DType(base)

    @property
    def as_numpy_dtype(self):
        """The matching numpy scalar type (``np.object_`` for strings,
        resources and variants; a one-field structured ``np.dtype`` for the
        quantized types, e.g. ``[("qint8", "i1")]``)."""
        return _BASE_TYPES[self._base_enum][1]

    # --- classification -------------------------------------------------

    @property
    def is_floating(self):
        """True for real floating point types."""
        return self._base_enum in _FLOATING

    @property
    def is_integer(self):
        """True for signed and unsigned integer types (not bool)."""
        base = self._base_enum
        return base in _SIGNED_INT or base in _UNSIGNED_INT

    @property
    def is_unsigned(self):
        """True for unsigned integer types."""
        return self._base_enum in _UNSIGNED_INT

    @property
    def is_complex(self):
        """True for complex types."""
        return self._base_enum in _COMPLEX

    @property
    def is_bool(self):
        """True for the boolean type."""
        return self._base_enum == DT_BOOL

    @property
    def is_numpy_compatible(self):
        """False for types numpy cannot hold natively (resource, variant)."""
        return self._base_enum not in _NUMPY_INCOMPATIBLE

    @property
    def is_quantized(self):
        """True for qint8, quint8, qint16, quint16 and qint32."""
        return self._base_enum in _QUANTIZED

    # --- numeric limits -------------------------------------------------

    def _check_numeric(self, what):
        base = self._base_enum
        if base in _NO_LIMITS or base == DT_BOOL:
            raise TypeError(f"Cannot find {what} value of {self.name}.")

    @property
    def min(self):
        """The smallest representable value.

        Raises:
            TypeError: For bool, string, complex, resource, variant and the
                quantized types (as TF).
        """
        self._check_numeric("minimum")
        np_type = self.as_numpy_dtype
        if self.is_floating:
            return np_type(np.finfo(np_type).min)
        return np_type(np.iinfo(np_type).min)

    @property
    def max(self):
        """The largest representable value.

        Raises:
            TypeError: For bool, string, complex, resource, variant and the
                quantized types (as TF).
        """
        self._check_numeric("maximum")
        np_type = self.as_numpy_dtype
        if self.is_floating:
            return np_type(np.finfo(np_type).max)
        return np_type(np.iinfo(np_type).max)

    @property
    def limits(self):
        """Intensity limits ``(0, max)`` as used for image data.

        The lower limit is clipped to 0; floating types span ``(0, 1)``
        and bool spans ``(False, True)``.

        Raises:
            TypeError: For string, complex, resource, variant and the quantized
                types.
        """
        base = self._base_enum
        if base == DT_BOOL:
            return (False, True)
        if base in _NO_LIMITS:
            raise TypeError(f"No intensity limits for {self.name}.")
        if base in _FLOATING:
            return (0, 1)
        return (0, int(np.iinfo(self.as_numpy_dtype).max))

    @property
    def size(self):
        """Size in bytes of one element (1 for resource and variant)."""
        if self._base_enum in _NUMPY_INCOMPATIBLE:
            return 1
        return np.dtype(self.as_numpy_dtype).itemsize

    def is_compatible_with(self, other):
        """Whether a value of type ``other`` may be used where ``self`` is
        expected.

        ``self`` is compatible with ``other`` if they are equal or ``self``
        is the base type of the reference type ``other``.

        Args:
            other: Anything :func:`as_dtype` accepts.

        Returns:
            bool.
        """
        other = as_dtype(other)
        return self._type_enum in (other._type_enum, other._base_enum)

    # --- protocol -------------------------------------------------------

    def __eq__(self, other):
        if isinstance(other, DType):
            return self._type_enum == other._type_enum
        if other is None:
            return False
        try:
            other = as_dtype(other)
        except TypeError:
            return False
        return self._type_enum == other._type_enum

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(("kf.DType", self._type_enum))

    def __repr__(self):
        return "kf." + self.name

    def __str__(self):
        return f"<dtype: {self.name!r}>"

    def __reduce__(self):
        return (DType, (self._type_enum,))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


# --- singletons -----------------------------------------------------------

float16 = DType(DT_HALF)
half = float16
float32 = DType(DT_FLOAT)
float64 = DType(DT_DOUBLE)
double = float64
int8 = DType(DT_INT8)
int16 = DType(DT_INT16)
int32 = DType(DT_INT32)
int64 = DType(DT_INT64)
uint8 = DType(DT_UINT8)
uint16 = DType(DT_UINT16)
uint32 = DType(DT_UINT32)
uint64 = DType(DT_UINT64)
bool = DType(DT_BOOL)  # noqa: A001 - mirrors tf.bool
string = DType(DT_STRING)
complex64 = DType(DT_COMPLEX64)
complex128 = DType(DT_COMPLEX128)
resource = DType(DT_RESOURCE)
variant = DType(DT_VARIANT)
qint8 = DType(DT_QINT8)
quint8 = DType(DT_QUINT8)
qint16 = DType(DT_QINT16)
quint16 = DType(DT_QUINT16)
qint32 = DType(DT_QINT32)
QUANTIZED_DTYPES = frozenset({qint8, quint8, qint16, quint16, qint32, qint8._as_ref,
                              quint8._as_ref, qint16._as_ref, quint16._as_ref, qint32._as_ref})

float16_ref = float16._as_ref
half_ref = float16_ref
float32_ref = float32._as_ref
float64_ref = float64._as_ref
double_ref = float64_ref
int8_ref = int8._as_ref
int16_ref = int16._as_ref
int32_ref = int32._as_ref
int64_ref = int64._as_ref
uint8_ref = uint8._as_ref
uint16_ref = uint16._as_ref
uint32_ref = uint32._as_ref
uint64_ref = uint64._as_ref
bool_ref = bool._as_ref
string_ref = string._as_ref
complex64_ref = complex64._as_ref
complex128_ref = complex128._as_ref
resource_ref = resource._as_ref
variant_ref = variant._as_ref
qint8_ref = qint8._as_ref
quint8_ref = quint8._as_ref
qint16_ref = qint16._as_ref
quint16_ref = quint16._as_ref
qint32_ref = qint32._as_ref

_STRING_TO_DTYPE = {}
for _enum, (_name, _) in _BASE_TYPES.items():
    _STRING_TO_DTYPE[_name] = DType(_enum)
_STRING_TO_DTYPE.update({"half": float16, "float": float32,
                         "double": float64})
for _name, _dt in list(_STRING_TO_DTYPE.items()):
    _STRING_TO_DTYPE[_name + "_ref"] = _dt._as_ref
del _enum, _name, _dt

_PYTHON_TYPE_TO_DTYPE = {
    builtins.float: float32,
    builtins.int: int32,
    builtins.bool: bool,
    builtins.str: string,
    builtins.bytes: string,
    builtins.complex: complex128,
    builtins.object: string,
}

# (numpy kind, itemsize) -> DType
_NUMPY_KIND_TO_DTYPE = {
    ("f", 2): float16, ("f", 4): float32, ("f", 8): float64,
    ("i", 1): int8, ("i", 2): int16, ("i", 4): int32, ("i", 8): int64,
    ("u", 1): uint8, ("u", 2): uint16, ("u", 4): uint32, ("u", 8): uint64,
    ("b", 1): bool, ("c", 8): complex64, ("c", 16): complex128,
}
# The quantized types' structured numpy dtypes (native byte order) -> DType.
_STRUCTURED_TO_DTYPE = {np.dtype(t): DType(e) for e, (_, t) in _BASE_TYPES.items()
                        if e in _QUANTIZED}


def dtype_from_numpy(np_dtype):
    """Converts a numpy dtype (or scalar type) to a :class:`DType`.

    Object, unicode and bytes dtypes map to ``string``; the one-field
    structured dtypes of the quantized types (``[("qint8", "i1")]``) to those
    types.

    Args:
        np_dtype: A ``numpy.dtype`` or numpy scalar type.

    Returns:
        The matching DType.

    Raises:
        TypeError: If the numpy type has no kernflow equivalent.
    """
    try:
        dt = np.dtype(np_dtype)
    except TypeError:
        raise TypeError(
            f"Cannot convert {np_dtype!r} to a numpy dtype.") from None
    if dt.kind in ("O", "U", "S"):
        return string
    if dt.kind == "V":
        result = _STRUCTURED_TO_DTYPE.get(dt)
        if result is None:
            raise TypeError(f"Unsupported numpy dtype: {dt!r}")
        return result
    result = _NUMPY_KIND_TO_DTYPE.get((dt.kind, dt.itemsize))
    if result is None:
        raise TypeError(f"Unsupported numpy dtype: {dt!r}")
    return result


def as_dtype(type_value):
    """Converts ``type_value`` to a :class:`DType`.

    Args:
        type_value: A DType, a ``DataType`` enum int, a numpy dtype or
            scalar type, a Python type (``float`` -> float32, ``int`` ->
            int32, ``bool``, ``str``/``bytes`` -> string, ``complex`` ->
            complex128) or a type name (``"float32"``, ``"float"``,
            ``"double"``, ``"half"``, ``"float32_ref"``, ...).

    Returns:
        The matching DType.

    Raises:
        TypeError: If ``type_value`` cannot be converted.
    """
    if isinstance(type_value, DType):
        return type_value
    if isinstance(type_value, builtins.bool):
        raise TypeError(f"Cannot convert value {type_value!r} to a dtype.")
    if isinstance(type_value, (builtins.int, np.integer)):
        if _is_valid_enum(builtins.int(type_value)):
            return DType(builtins.int(type_value))
        raise TypeError(f"Cannot convert value {type_value!r} to a dtype: "
                        "unknown DataType enum value.")
    if isinstance(type_value, str):
        result = _STRING_TO_DTYPE.get(type_value)
        if result is None:
            raise TypeError(f"Cannot convert value {type_value!r} to a "
                            "dtype: unknown type name.")
        return result
    if isinstance(type_value, type):
        if type_value in _PYTHON_TYPE_TO_DTYPE:
            return _PYTHON_TYPE_TO_DTYPE[type_value]
        if issubclass(type_value, np.generic):
            try:
                return dtype_from_numpy(type_value)
            except TypeError:
                pass
    elif isinstance(type_value, np.dtype):
        try:
            return dtype_from_numpy(type_value)
        except TypeError:
            pass
    enum = getattr(type_value, "as_datatype_enum", None)
    if isinstance(enum, builtins.int) and _is_valid_enum(enum):
        return DType(enum)
    raise TypeError(f"Cannot convert value {type_value!r} to a dtype.")


# --- inference for constant conversion -----------------------------------

_INT32_MIN = -(2 ** 31)
_INT32_MAX = 2 ** 31 - 1
_INT64_MIN = -(2 ** 63)
_INT64_MAX = 2 ** 63 - 1

_KIND_RANK = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}


def _scalar_dtype(value):
    """Inference rule for a single non-sequence value; returns a DType."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "O":
            return _infer_sequence(value.ravel().tolist(), value)
        return dtype_from_numpy(value.dtype)
    if isinstance(value, np.generic):
        return dtype_from_numpy(value.dtype)
    if isinstance(value, builtins.bool):
        return bool
    if isinstance(value, builtins.int):
        if _INT32_MIN <= value <= _INT32_MAX:
            return int32
        if _INT64_MIN <= value <= _INT64_MAX:
            return int64
        raise ValueError(f"Python int {value} does not fit in int64.")
    if isinstance(value, builtins.float):
        return float32
    if isinstance(value, builtins.complex):
        return complex128
    if isinstance(value, (str, builtins.bytes)):
        return string
    raise TypeError(
        f"Cannot infer a dtype for value {value!r} of type "
        f"{type(value).__name__}.")


def _combine(a, b, original):
    """Widest of two inferred DTypes; strings never mix with numbers."""
    if a == b:
        return a
    if a == string or b == string:
        raise TypeError(
            f"Cannot mix strings and non-strings in {original!r}.")
    ka = np.dtype(a.as_numpy_dtype).kind
    kb = np.dtype(b.as_numpy_dtype).kind
    ra, rb = _KIND_RANK[ka], _KIND_RANK[kb]
    if ra != rb:
        return a if ra > rb else b
    if ra == 1:
        promoted = np.promote_types(a.as_numpy_dtype, b.as_numpy_dtype)
        if promoted.kind not in ("i", "u"):
            return int64
        return dtype_from_numpy(promoted)
    return a if a.size >= b.size else b


def _infer_sequence(values, original):
    result = None
    stack = [values]
    while stack:
        current = stack.pop()
        for item in current:
            if isinstance(item, (list, tuple)):
                stack.append(item)
                continue
            dt = _scalar_dtype(item)
            result = dt if result is None else _combine(result, dt, original)
    return float32 if result is None else result


def result_dtype_for_python_value(value):
    """Infers the DType a constant built from ``value`` gets.

    Rules: Python ``float`` -> float32; Python ``int`` -> int32, or int64
    if it does not fit; ``bool`` -> bool; ``str``/``bytes`` -> string;
    ``complex`` -> complex128; numpy arrays and scalars keep their dtype;
    nested lists/tuples take the widest element type (bool < integer <
    floating < complex, wider within a kind wins). An empty list gives
    float32.

    Args:
        value: A Python scalar, numpy value, or nested list/tuple of them.

    Returns:
        The inferred DType.

    Raises:
        TypeError: If an element has no dtype or strings are mixed with
            numbers.
        ValueError: If a Python int does not fit in int64.
    """
    if isinstance(value, (list, tuple)):
        return _infer_sequence(value, value)
    return _scalar_dtype(value)
