"""Static shapes of tensors (``TensorShape``) with TF1 semantics.

A shape either has unknown rank (``dims is None``) or a known number of
dimensions, each a non-negative int or unknown. As in TF1, indexing a shape
gives a :class:`Dimension` (``shape[1].value``) and ``dims`` a list of them;
``as_list()`` and ``dim_values`` give plain ints / ``None``; slicing gives a
new shape.
"""

from __future__ import annotations

import operator

__all__ = [
    "Dimension", "as_dimension", "dimension_value", "dimension_at_index", "TensorShape",
    "as_shape", "unknown_shape", "scalar", "vector", "matrix",
    "broadcast_shape",
]


def _to_dim_value(value):
    """Normalises a dimension-like value to a non-negative int or None."""
    if value is None:
        return None
    if isinstance(value, Dimension):
        return value.value
    if isinstance(value, (str, bytes, float)):
        raise TypeError(
            f"Dimension value must be integer or None, got {value!r} "
            f"of type {type(value).__name__}.")
    try:
        result = operator.index(value)
    except TypeError:
        raise TypeError(
            f"Dimension value must be integer or None, got {value!r} "
            f"of type {type(value).__name__}.") from None
    if result < 0:
        raise ValueError(f"Dimension {result} must be >= 0")
    return result


class Dimension:
    """A single, possibly unknown, dimension of a shape.

    Arithmetic with an unknown dimension yields an unknown dimension;
    comparisons involving an unknown dimension return ``None``.
    """

    __slots__ = ("_value",)

    def __init__(self, value):
        """Creates a Dimension.

        Args:
            value: A non-negative int, ``None`` (unknown) or a Dimension.

        Raises:
            TypeError: If ``value`` is not integer-like or None.
            ValueError: If ``value`` is negative.
        """
        self._value = _to_dim_value(value)

    @property
    def value(self):
        """The int value, or None if unknown."""
        return self._value

    def __repr__(self):
        return f"Dimension({self._value!r})"

    def __str__(self):
        return "?" if self._value is None else str(self._value)

    def __int__(self):
        return int(self._value)

    def __index__(self):
        return operator.index(self._value)

    def __bool__(self):
        return bool(self._value)

    def __hash__(self):
        return hash(self._value)

    def _compare(self, other, op):
        try:
            other = as_dimension(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self._value is None or other.value is None:
            return None
        return op(self._value, other.value)

    def __eq__(self, other):
        return self._compare(other, operator.eq)

    def __ne__(self, other):
        return self._compare(other, operator.ne)

    def __lt__(self, other):
        return self._compare(other, operator.lt)

    def __le__(self, other):
        return self._compare(other, operator.le)

    def __gt__(self, other):
        return self._compare(other, operator.gt)

    def __ge__(self, other):
        return self._compare(other, operator.ge)

    def _arith(self, other, op, reverse=False):
        try:
            other = as_dimension(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self._value is None or other.value is None:
            return Dimension(None)
        if reverse:
            return Dimension(op(other.value, self._value))
        return Dimension(op(self._value, other.value))

    def __add__(self, other):
        return self._arith(other, operator.add)

    def __radd__(self, other):
        return self._arith(other, operator.add, reverse=True)

    def __sub__(self, other):
        return self._arith(other, operator.sub)

    def __rsub__(self, other):
        return self._arith(other, operator.sub, reverse=True)

    def __mul__(self, other):
        return self._arith(other, operator.mul)

    def __rmul__(self, other):
        return self._arith(other, operator.mul, reverse=True)

    def __floordiv__(self, other):
        return self._arith(other, operator.floordiv)

    def __rfloordiv__(self, other):
        return self._arith(other, operator.floordiv, reverse=True)

    def __mod__(self, other):
        return self._arith(other, operator.mod)

    def __rmod__(self, other):
        return self._arith(other, operator.mod, reverse=True)

    def __truediv__(self, other):
        raise TypeError("unsupported operand type(s) for /: 'Dimension' and "
                        f"{type(other).__name__!r}, please use // instead")

    def __rtruediv__(self, other):
        raise TypeError(f"unsupported operand type(s) for /: "
                        f"{type(other).__name__!r} and 'Dimension', please "
                        "use // instead")

    def is_compatible_with(self, other):
        """True if ``self`` and ``other`` could be the same dimension.

        Args:
            other: A Dimension or dimension-like value.
        """
        other = as_dimension(other)
        return (self._value is None or other.value is None
                or self._value == other.value)

    def assert_is_compatible_with(self, other):
        """Raises ValueError unless ``self`` is compatible with ``other``.

        Args:
            other: A Dimension or dimension-like value.
        """
        if not self.is_compatible_with(other):
            raise ValueError(
                f"Dimensions {self} and {as_dimension(other)} are not "
                "compatible")

    def merge_with(self, other):
        """Returns the most specific dimension compatible with both.

        Args:
            other: A Dimension or dimension-like value.

        Raises:
            ValueError: If the two dimensions are known and differ.
        """
        other = as_dimension(other)
        self.assert_is_compatible_with(other)
        return Dimension(self._value if self._value is not None
                         else other.value)

    def __reduce__(self):
        return (Dimension, (self._value,))


def as_dimension(value):
    """Converts ``value`` to a :class:`Dimension` (identity for Dimensions).

    Args:
        value: A Dimension, non-negative int or None.
    """
    if isinstance(value, Dimension):
        return value
    return Dimension(value)


def dimension_value(dimension):
    """Returns the plain int/None value of a Dimension or int/None."""
    if isinstance(dimension, Dimension):
        return dimension.value
    return dimension


def dimension_at_index(shape, index):
    """Returns ``shape[index]`` as a Dimension; unknown if the rank is unknown.

    Args:
        shape: Anything :func:`as_shape` accepts.
        index: An int index into the shape.
    """
    return as_shape(shape)[index]


class TensorShape:
    """The static shape of a tensor (TF1 behaviour for indexing and ``dims``).

    ``shape[i]`` is a :class:`Dimension` and ``dims`` a list of them (``Dimension(None) is None`` is
    False: use ``.value`` or :func:`dimension_value`); ``as_list()``, iteration and ``dim_values``
    give plain int-or-None.

    Attributes:
        dims: ``None`` for unknown rank, else a list of Dimensions.
    """

    __slots__ = ("_dims",)

    def __init__(self, dims):
        """Creates a TensorShape.

        Args:
            dims: ``None`` (unknown rank), a TensorShape, an iterable of
                ints / ``None`` / Dimensions (e.g. a list or numpy shape), or
                a single int / Dimension meaning a 1-D shape (as in TF1).

        Raises:
            TypeError: If ``dims`` or one of its entries is not shape-like.
            ValueError: If a dimension is negative.
        """
        if dims is None:
            self._dims = None
        elif isinstance(dims, TensorShape):
            self._dims = dims._dims
        elif isinstance(dims, (str, bytes)):
            raise TypeError(f"Cannot convert {dims!r} to a TensorShape.")
        else:
            try:
                items = iter(dims)
            except TypeError:
                # TF1: a non-iterable (int, Dimension) is a 1-D shape.
                try:
                    self._dims = (_to_dim_value(dims),)
                except TypeError:
                    raise TypeError(
                        f"Cannot convert {dims!r} to a TensorShape: expected "
                        "None, a dimension or a sequence of dimensions."
                    ) from None
                return
            self._dims = tuple(_to_dim_value(d) for d in items)

    @property
    def dims(self):
        """``None`` for unknown rank, else a list of :class:`Dimension` (as in TF1)."""
        if self._dims is None:
            return None
        return [Dimension(d) for d in self._dims]

    @property
    def dim_values(self):
        """``None`` for unknown rank, else a tuple of int-or-None.

        A kernflow extension (TF2's ``dims``): the plain values internal code works with.
        """
        return self._dims

    @property
    def rank(self):
        """The number of dimensions, or None if unknown."""
        return None if self._dims is None else len(self._dims)

    @property
    def ndims(self):
        """Alias of :attr:`rank`."""
        return self.rank

    def __repr__(self):
        if self._dims is None:
            return "TensorShape(None)"
        return f"TensorShape({list(self._dims)!r})"

    def __str__(self):
        if self._dims is None:
            return "<unknown>"
        parts = ["?" if d is None else str(d) for d in self._dims]
        if len(parts) == 1:
            return f"({parts[0]},)"
        return "(" + ", ".join(parts) + ")"

    def __len__(self):
        if self._dims is None:
            raise ValueError("Cannot take the length of shape with unknown "
                             "rank.")
        return len(self._dims)

    def __bool__(self):
        return self._dims is not None

    def __iter__(self):
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key):
        if self._dims is not None:
            if isinstance(key, slice):
                return TensorShape(self._dims[key])
            return Dimension(self._dims[key])
        if isinstance(key, slice):
            if key.step is not None:
                raise ValueError("Steps are not supported when slicing a "
                                 "shape of unknown rank.")
            start = 0 if key.start is None else key.start
            stop = key.stop
            if stop is None or start < 0 or stop < 0:
                return unknown_shape()
            return unknown_shape(rank=max(stop - start, 0))
        return Dimension(None)

    def as_list(self):
        """Returns the dims as a list of int-or-None.

        Raises:
            ValueError: If the rank is unknown.
        """
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown "
                             "TensorShape.")
        return list(self._dims)

    def is_fully_defined(self):
        """True if the rank and every dimension are known."""
        return self._dims is not None and all(d is not None
                                              for d in self._dims)

    def assert_is_fully_defined(self):
        """Raises ValueError unless the shape is fully defined."""
        if not self.is_fully_defined():
            raise ValueError(f"Shape {self} is not fully defined")

    def num_elements(self):
        """The total element count, or None if not fully defined."""
        if not self.is_fully_defined():
            return None
        total = 1
        for d in self._dims:
            total *= d
        return total

    def is_compatible_with(self, other):
        """True if ``self`` and ``other`` could describe the same tensor.

        Args:
            other: Anything :func:`as_shape` accepts.
        """
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return True
        if len(self._dims) != len(other._dims):
            return False
        return all(a is None or b is None or a == b
                   for a, b in zip(self._dims, other._dims))

    def assert_is_compatible_with(self, other):
        """Raises ValueError unless ``self`` is compatible with ``other``.

        Args:
            other: Anything :func:`as_shape` accepts.
        """
        other = as_shape(other)
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are incompatible")

    def merge_with(self, other):
        """Returns the most specific shape compatible with both shapes.

        Args:
            other: Anything :func:`as_shape` accepts.

        Raises:
            ValueError: If the shapes are not compatible.
        """
        other = as_shape(other)
        if self._dims is None:
            return other
        if other._dims is None:
            return self
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape([a if a is not None else b
                            for a, b in zip(self._dims, other._dims)])

    def most_specific_compatible_shape(self, other):
        """Returns the most specific shape both shapes are compatible with.

        Dimensions that differ (or are unknown in either) become unknown;
        differing ranks give an unknown-rank shape.

        Args:
            other: Anything :func:`as_shape` accepts.
        """
        other = as_shape(other)
        if (self._dims is None or other._dims is None
                or len(self._dims) != len(other._dims)):
            return unknown_shape()
        return TensorShape([a if a == b else None
                            for a, b in zip(self._dims, other._dims)])

    def concatenate(self, other):
        """Returns ``self`` followed by the dims of ``other``.

        The result has unknown rank if either operand does.

        Args:
            other: Anything :func:`as_shape` accepts.
        """
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return unknown_shape()
        return TensorShape(self._dims + other._dims)

    def __add__(self, other):
        return self.concatenate(other)

    def __radd__(self, other):
        return as_shape(other).concatenate(self)

    def assert_same_rank(self, other):
        """Raises ValueError if both ranks are known and differ.

        Args:
            other: Anything :func:`as_shape` accepts.
        """
        other = as_shape(other)
        if (self.rank is not None and other.rank is not None
                and self.rank != other.rank):
            raise ValueError(f"Shapes {self} and {other} must have the same "
                             "rank")

    def assert_has_rank(self, rank):
        """Raises ValueError if the rank is known and differs from ``rank``.

        Args:
            rank: Expected rank.
        """
        if self.rank not in (None, rank):
            raise ValueError(f"Shape {self} must have rank {rank}")

    def with_rank(self, rank):
        """Returns a shape of exactly ``rank`` dims merged with ``self``.

        Args:
            rank: The required rank.

        Raises:
            ValueError: If ``self`` has a different known rank.
        """
        try:
            return self.merge_with(unknown_shape(rank=rank))
        except ValueError:
            raise ValueError(f"Shape {self} must have rank {rank}") from None

    def with_rank_at_least(self, rank):
        """Returns ``self`` if its rank is unknown or at least ``rank``.

        Args:
            rank: The minimum rank.

        Raises:
            ValueError: If the known rank is smaller.
        """
        if self.rank is not None and self.rank < rank:
            raise ValueError(f"Shape {self} must have rank at least {rank}")
        return self

    def with_rank_at_most(self, rank):
        """Returns ``self`` if its rank is unknown or at most ``rank``.

        Args:
            rank: The maximum rank.

        Raises:
            ValueError: If the known rank is larger.
        """
        if self.rank is not None and self.rank > rank:
            raise ValueError(f"Shape {self} must have rank at most {rank}")
        return self

    def __eq__(self, other):
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self._dims == other._dims

    def __ne__(self, other):
        result = self.__eq__(other)
        if result is NotImplemented:
            return result
        return not result

    def __hash__(self):
        return hash(("TensorShape", self._dims))

    def __reduce__(self):
        return (TensorShape, (self._dims,))


def as_shape(shape):
    """Converts ``shape`` to a :class:`TensorShape` (identity if already one).

    Args:
        shape: A TensorShape, None, or an iterable of dimensions.
    """
    if isinstance(shape, TensorShape):
        return shape
    return TensorShape(shape)


def unknown_shape(rank=None, ndims=None):
    """Returns a shape of unknown rank, or of known rank with unknown dims.

    Args:
        rank: Optional rank; None gives unknown rank.
        ndims: Deprecated alias of ``rank``.
    """
    if rank is None:
        rank = ndims
    if rank is None:
        return TensorShape(None)
    return TensorShape([None] * rank)


def scalar():
    """Returns the rank-0 shape ``()``."""
    return TensorShape(())


def vector(length):
    """Returns the rank-1 shape ``(length,)``.

    Args:
        length: Int or None.
    """
    return TensorShape([length])


def matrix(rows, cols):
    """Returns the rank-2 shape ``(rows, cols)``.

    Args:
        rows: Int or None.
        cols: Int or None.
    """
    return TensorShape([rows, cols])


def broadcast_shape(shape_x, shape_y):
    """Returns the broadcast of two static shapes (numpy rules).

    Unknown rank in either gives unknown rank. An unknown dim against 1 (or
    another unknown) stays unknown; against a known ``n != 1`` it becomes
    ``n``.

    Args:
        shape_x: Anything :func:`as_shape` accepts.
        shape_y: Anything :func:`as_shape` accepts.

    Raises:
        ValueError: If two known dims differ and neither is 1.
    """
    shape_x = as_shape(shape_x)
    shape_y = as_shape(shape_y)
    if shape_x.rank is None or shape_y.rank is None:
        return unknown_shape()
    xs, ys = shape_x.dim_values, shape_y.dim_values
    n = max(len(xs), len(ys))
    xs = (1,) * (n - len(xs)) + xs
    ys = (1,) * (n - len(ys)) + ys
    result = []
    for a, b in zip(xs, ys):
        if a is None and b is None:
            result.append(None)
        elif a is None:
            result.append(None if b == 1 else b)
        elif b is None:
            result.append(None if a == 1 else a)
        elif a == b or b == 1:
            result.append(a)
        elif a == 1:
            result.append(b)
        else:
            raise ValueError(f"Incompatible shapes for broadcasting: "
                             f"{shape_x} and {shape_y}")
    return TensorShape(result)
