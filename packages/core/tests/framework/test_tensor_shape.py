"""Tests for kernflow.core.framework.tensor_shape."""

import pickle

import numpy as np
import pytest

from kernflow.core.framework import tensor_shape as ts
from kernflow.core.framework.tensor_shape import Dimension, TensorShape


class TestDimension:

    def test_value_and_conversion(self):
        assert Dimension(3).value == 3
        assert Dimension(None).value is None
        assert Dimension(Dimension(4)).value == 4
        assert Dimension(np.int64(5)).value == 5
        assert int(Dimension(7)) == 7
        assert [0, 1, 2][Dimension(1)] == 1
        assert ts.as_dimension(2).value == 2
        d = Dimension(6)
        assert ts.as_dimension(d) is d
        assert ts.dimension_value(d) == 6
        assert ts.dimension_value(None) is None
        assert ts.dimension_value(3) == 3

    def test_invalid(self):
        with pytest.raises(ValueError):
            Dimension(-1)
        with pytest.raises(TypeError):
            Dimension(1.5)
        with pytest.raises(TypeError):
            Dimension("3")

    def test_repr_str(self):
        assert repr(Dimension(3)) == "Dimension(3)"
        assert repr(Dimension(None)) == "Dimension(None)"
        assert str(Dimension(3)) == "3"
        assert str(Dimension(None)) == "?"

    def test_arithmetic(self):
        assert (Dimension(3) + 4).value == 7
        assert (4 + Dimension(3)).value == 7
        assert (Dimension(5) - 2).value == 3
        assert (10 - Dimension(4)).value == 6
        assert (Dimension(3) * Dimension(4)).value == 12
        assert (2 * Dimension(4)).value == 8
        assert (Dimension(9) // 2).value == 4
        assert (9 // Dimension(2)).value == 4
        assert (Dimension(9) % 4).value == 1
        assert (Dimension(None) + 1).value is None
        assert (3 * Dimension(None)).value is None
        with pytest.raises(TypeError):
            Dimension(4) / 2
        with pytest.raises(ValueError):
            Dimension(1) - 2

    def test_comparisons(self):
        assert Dimension(3) == 3
        assert Dimension(3) == Dimension(3)
        assert Dimension(3) != 4
        assert (Dimension(None) == 3) is None
        assert (Dimension(None) != 3) is None
        assert Dimension(2) < 3
        assert Dimension(3) >= Dimension(3)
        assert (Dimension(None) < 3) is None
        assert hash(Dimension(3)) == hash(Dimension(3))

    def test_compatibility_and_merge(self):
        assert Dimension(3).is_compatible_with(3)
        assert Dimension(3).is_compatible_with(None)
        assert Dimension(None).is_compatible_with(Dimension(8))
        assert not Dimension(3).is_compatible_with(4)
        assert Dimension(None).merge_with(5).value == 5
        assert Dimension(5).merge_with(None).value == 5
        assert Dimension(None).merge_with(None).value is None
        with pytest.raises(ValueError, match="3.*4"):
            Dimension(3).merge_with(4)
        with pytest.raises(ValueError):
            Dimension(3).assert_is_compatible_with(4)


class TestTensorShapeBasics:

    def test_constructor_forms(self):
        assert TensorShape(None).dims is None
        assert TensorShape(None).dim_values is None
        assert TensorShape([2, None]).dim_values == (2, None)
        assert TensorShape((2, 3)).dim_values == (2, 3)
        assert TensorShape([Dimension(2), Dimension(None)]).dim_values == (2, None)
        assert TensorShape(np.zeros((4, 5)).shape).dim_values == (4, 5)
        assert TensorShape([np.int32(3)]).dim_values == (3,)
        assert isinstance(TensorShape([np.int32(3)]).dim_values[0], int)
        s = TensorShape([1, 2])
        assert TensorShape(s).dim_values == (1, 2)
        assert TensorShape([]).dim_values == ()
        assert TensorShape([]).dims == []

    def test_constructor_errors(self):
        with pytest.raises(TypeError):
            TensorShape(3.0)
        with pytest.raises(TypeError):
            TensorShape("ab")
        with pytest.raises(TypeError):
            TensorShape([1.5])
        with pytest.raises(ValueError):
            TensorShape([2, -1])

    def test_rank(self):
        assert TensorShape(None).rank is None
        assert TensorShape(None).ndims is None
        assert TensorShape([1, None, 3]).rank == 3
        assert TensorShape([]).ndims == 0

    def test_len_iter_bool(self):
        s = TensorShape([2, None])
        assert len(s) == 2
        assert list(s) == [2, None]
        with pytest.raises(ValueError):
            len(TensorShape(None))
        with pytest.raises(ValueError):
            iter(TensorShape(None))
        assert bool(TensorShape([]))
        assert not bool(TensorShape(None))

    def test_getitem(self):
        s = TensorShape([2, None, 5])
        assert s[0] == 2
        assert s[1].value is None
        assert s[-1] == 5
        assert isinstance(s[0], Dimension)
        assert s[1:] == TensorShape([None, 5])
        assert isinstance(s[:2], TensorShape)
        with pytest.raises(IndexError):
            s[3]
        unknown = TensorShape(None)
        assert isinstance(unknown[0], Dimension) and unknown[0].value is None
        assert unknown[1:3] == ts.unknown_shape(rank=2)
        assert unknown[1:].rank is None
        assert unknown[-2:].rank is None

    def test_as_list(self):
        assert TensorShape([1, None]).as_list() == [1, None]
        with pytest.raises(ValueError):
            TensorShape(None).as_list()

    def test_fully_defined_and_num_elements(self):
        assert TensorShape([2, 3]).is_fully_defined()
        assert TensorShape([]).is_fully_defined()
        assert not TensorShape([2, None]).is_fully_defined()
        assert not TensorShape(None).is_fully_defined()
        assert TensorShape([2, 3, 4]).num_elements() == 24
        assert TensorShape([]).num_elements() == 1
        assert TensorShape([2, 0]).num_elements() == 0
        assert TensorShape([2, None]).num_elements() is None
        assert TensorShape(None).num_elements() is None
        TensorShape([1]).assert_is_fully_defined()
        with pytest.raises(ValueError, match="not fully defined"):
            TensorShape([None]).assert_is_fully_defined()

    def test_repr_str(self):
        assert repr(TensorShape([2, None])) == "TensorShape([2, None])"
        assert repr(TensorShape(None)) == "TensorShape(None)"
        assert repr(TensorShape([])) == "TensorShape([])"
        assert str(TensorShape([2, None])) == "(2, ?)"
        assert str(TensorShape([3])) == "(3,)"
        assert str(TensorShape([])) == "()"
        assert str(TensorShape(None)) == "<unknown>"

    def test_equality_and_hash(self):
        assert TensorShape([1, 2]) == TensorShape([1, 2])
        assert TensorShape([1, None]) == TensorShape([1, None])
        assert TensorShape(None) == TensorShape(None)
        assert TensorShape([1, 2]) != TensorShape([1, None])
        assert TensorShape(None) != TensorShape([])
        assert TensorShape([1, 2]) == [1, 2]
        assert TensorShape([1, 2]) == (1, 2)
        assert TensorShape([1, 2]) != "ab"
        assert hash(TensorShape([1, None])) == hash(TensorShape((1, None)))
        assert len({TensorShape(None), TensorShape(None),
                    TensorShape([1])}) == 2

    def test_pickle(self):
        for s in (TensorShape(None), TensorShape([1, None])):
            assert pickle.loads(pickle.dumps(s)) == s


class TestTensorShapeRelations:

    def test_is_compatible_with(self):
        assert TensorShape([2, None]).is_compatible_with([2, 3])
        assert TensorShape(None).is_compatible_with([2, 3])
        assert TensorShape([2, 3]).is_compatible_with(None)
        assert not TensorShape([2, 3]).is_compatible_with([2, 4])
        assert not TensorShape([2, 3]).is_compatible_with([2, 3, 1])
        TensorShape([None]).assert_is_compatible_with([4])
        with pytest.raises(ValueError, match=r"\(2, 3\).*\(2, 4\)"):
            TensorShape([2, 3]).assert_is_compatible_with([2, 4])

    def test_merge_with(self):
        merged = TensorShape([2, None, None]).merge_with([None, 3, None])
        assert merged == TensorShape([2, 3, None])
        assert TensorShape(None).merge_with([1]) == TensorShape([1])
        assert TensorShape([1]).merge_with(None) == TensorShape([1])
        with pytest.raises(ValueError) as info:
            TensorShape([2, 3]).merge_with([2, 4])
        assert "(2, 3)" in str(info.value) and "(2, 4)" in str(info.value)
        with pytest.raises(ValueError):
            TensorShape([2]).merge_with([2, 3])

    def test_most_specific_compatible_shape(self):
        a = TensorShape([2, 3, None])
        assert a.most_specific_compatible_shape([2, 4, 5]) == \
            TensorShape([2, None, None])
        assert a.most_specific_compatible_shape([2]).rank is None
        assert a.most_specific_compatible_shape(None).rank is None

    def test_concatenate(self):
        a = TensorShape([1, 2])
        assert a.concatenate([3]) == TensorShape([1, 2, 3])
        assert a.concatenate(None).rank is None
        assert TensorShape(None).concatenate([1]).rank is None
        assert a + TensorShape([None]) == TensorShape([1, 2, None])
        assert [0] + a == TensorShape([0, 1, 2])

    def test_with_rank(self):
        assert TensorShape(None).with_rank(2) == TensorShape([None, None])
        assert TensorShape([1, 2]).with_rank(2) == TensorShape([1, 2])
        with pytest.raises(ValueError, match="rank 3"):
            TensorShape([1, 2]).with_rank(3)
        assert TensorShape([1, 2]).with_rank_at_least(1) == [1, 2]
        assert TensorShape(None).with_rank_at_least(5).rank is None
        with pytest.raises(ValueError):
            TensorShape([1]).with_rank_at_least(2)
        assert TensorShape([1]).with_rank_at_most(1) == [1]
        with pytest.raises(ValueError):
            TensorShape([1, 2]).with_rank_at_most(1)

    def test_assert_same_rank_and_has_rank(self):
        TensorShape([1, 2]).assert_same_rank([None, None])
        TensorShape(None).assert_same_rank([1])
        with pytest.raises(ValueError):
            TensorShape([1]).assert_same_rank([1, 2])
        TensorShape([1]).assert_has_rank(1)
        TensorShape(None).assert_has_rank(4)
        with pytest.raises(ValueError):
            TensorShape([1]).assert_has_rank(2)


class TestModuleFunctions:

    def test_constructors(self):
        assert ts.unknown_shape().rank is None
        assert ts.unknown_shape(rank=3) == TensorShape([None] * 3)
        assert ts.unknown_shape(ndims=1) == TensorShape([None])
        assert ts.scalar() == TensorShape([])
        assert ts.vector(4) == TensorShape([4])
        assert ts.vector(None) == TensorShape([None])
        assert ts.matrix(2, 3) == TensorShape([2, 3])
        s = TensorShape([1])
        assert ts.as_shape(s) is s
        assert ts.as_shape([1, None]) == TensorShape([1, None])
        assert ts.as_shape(None).rank is None

    @pytest.mark.parametrize("a,b,expected", [
        ([2, 3], [2, 3], [2, 3]),
        ([2, 1], [1, 3], [2, 3]),
        ([5, 1, 4], [3, 1], [5, 3, 4]),
        ([], [2, 3], [2, 3]),
        ([None], [1], [None]),
        ([1], [None], [None]),
        ([None], [4], [4]),
        ([4], [None], [4]),
        ([None], [None], [None]),
        ([None, 3], [2, 1], [2, 3]),
        ([None], [0], [0]),
        ([2, None], [3, 1, 1], [3, 2, None]),
    ])
    def test_broadcast_shape(self, a, b, expected):
        result = ts.broadcast_shape(TensorShape(a), TensorShape(b))
        assert result == TensorShape(expected)

    def test_broadcast_matches_numpy_on_known(self):
        rng = np.random.default_rng(0)
        for _ in range(50):
            ra, rb = rng.integers(0, 4, size=2)
            a = tuple(int(x) for x in rng.choice([1, 2, 3], size=ra))
            b = tuple(int(x) for x in rng.choice([1, 2, 3], size=rb))
            try:
                expected = np.broadcast_shapes(a, b)
            except ValueError:
                with pytest.raises(ValueError):
                    ts.broadcast_shape(TensorShape(a), TensorShape(b))
            else:
                assert ts.broadcast_shape(TensorShape(a),
                                          TensorShape(b)) == expected

    def test_broadcast_unknown_rank_and_errors(self):
        assert ts.broadcast_shape(TensorShape(None), TensorShape([2])).rank \
            is None
        assert ts.broadcast_shape(TensorShape([2]), TensorShape(None)).rank \
            is None
        with pytest.raises(ValueError) as info:
            ts.broadcast_shape(TensorShape([2, 3]), TensorShape([4]))
        assert "(2, 3)" in str(info.value) and "(4,)" in str(info.value)
