"""`kf.sparse`: SparseTensor ops (kernflow.core.ops.sparse_ops) under TF1's `tf.sparse` names."""

from kernflow.core.framework.sparse_tensor import SparseTensor, sparse_placeholder as placeholder
from kernflow.core.ops.sparse_ops import (sparse_add as add, sparse_fill_empty_rows as fill_empty_rows,
                                          sparse_from_dense as from_dense,
                                          sparse_reduce_sum as reduce_sum, sparse_reorder as reorder,
                                          sparse_reshape as reshape, sparse_retain as retain,
                                          sparse_segment_mean as segment_mean,
                                          sparse_segment_sqrt_n as segment_sqrt_n,
                                          sparse_segment_sum as segment_sum, sparse_slice as slice,
                                          sparse_tensor_dense_matmul as sparse_dense_matmul,
                                          sparse_tensor_to_dense as to_dense)

matmul = sparse_dense_matmul
tensor_dense_matmul = sparse_dense_matmul

__all__ = ["SparseTensor", "placeholder", "add", "fill_empty_rows", "from_dense", "reduce_sum",
           "reorder", "reshape", "retain", "segment_mean", "segment_sqrt_n", "segment_sum", "slice",
           "sparse_dense_matmul", "matmul", "tensor_dense_matmul", "to_dense"]
