"""Gradient functions per op family (math_grad, array_grad, nn_grad...), registered by op type."""
