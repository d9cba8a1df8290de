"""Every diagnostic ptodsl reports, rendered in full: `file:line:col: error: ...`, the
`-->` location, the source line and carets. The rendered texts are golden files."""

from __future__ import annotations

import re

import pytest
import torch

import ptodsl
from ptodsl.frontend.typecheck import MODE_DEPENDENT, SPELLED_OUT, WRITTEN_OTHERWISE, cookbook_note

HEADER = """kernel k
dims M = 4, N = 8
"""
CONV = "kernel k\ninput x: f32[2, 4, 8, 8]\n"
LOOP = (
    "kernel k\ndims T = 4, B = 2, H = 8\ninput x: f32[T, B, H]\ninput h0: f32[B, H]\n"
    "output y: f32[T, B, H]\nlet h = h0\nfor t in range(T)\n    h = tanh(x[t] + h)\n"
    "    y[t] = h\nend\n"
)
ATTENTION = (
    HEADER + "input x: f32[M, 2, N]\nweight attn: multihead_attention(N, 2)\n"
    "output y: f32[M, 2, N]\n"
)

CASES = {
    # syntax
    "unexpected_character": "kernel k\ny = x $ 1.0\n",
    "unexpected_end_of_file": "kernel k\ny = (x +",
    "missing_kernel_name": "kernel\n",
    "missing_colon": "kernel k\ninput x f32[4]\n",
    "keyword_before_positional": "kernel k\ny = f(a=1.0, 2.0)\n",
    "huge_number": "kernel k\ndims N = 4\ninput x: f32[N]\noutput y: f32[N]\ny = x * 1e999\n",
    # declarations
    "keyword_as_name": HEADER + "input lambda: f32[M, N]\n",
    "builtin_as_name": HEADER + "input print: f32[M]\n",
    "module_as_name": HEADER + "param torch: f32 = 1.0\n",
    "generated_name_as_name": HEADER + "input _chunk_x: f32[M, N]\n",
    "unknown_dtype": HEADER + "input x: f64[M, N]\n",
    "duplicate_name": HEADER + "input M: f32[M]\n",
    "zero_dim": "kernel k\ndims N = 0\n",
    "rank_above_eight": HEADER + "input x: f32[M, M, M, M, M, M, M, M, N]\n",
    "too_many_kernel_axes": "kernel k\ndims A = 2, B = 3, C = 4, D = 5, E = 6\n"
    "input x: f32[A, B * C, D, E]\ninput w: f32[B, 1, D, 1]\noutput y: f32[A, B * C, D, E]\n"
    "y = x * w\n",
    "unknown_dim": HEADER + "input x: f32[M, K]\n",
    "unknown_domain": HEADER + "input x: f32[M, N] in happy\n",
    "scalar_input_domain": HEADER + "input s: f32 in positive\n",
    "output_shaped_by_a_scalar": HEADER + "output y: f32\ny = 2.0\n",
    "no_output": HEADER + "input x: f32[M, N]\n",
    "output_never_assigned": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n",
    "int_param_without_value": HEADER + "param dim: int\n",
    "int_param_not_an_integer": HEADER + "param dim: int = 1.5\n",
    "int_list_param_wrong_length": HEADER + "param shape: int[3] = [M, N]\n",
    "float_param_with_length": HEADER + "param eps: f32[2] = 1.0\n",
    "float_param_list_value": HEADER + "param eps: f32 = [1]\n",
    # compiled, then `check` compared inf with a finite golden
    "float_param_beyond_f32": HEADER + "param a: f32 = 1e39\n",
    "float_param_beyond_f16": HEADER + "param a: f16 = -70000\n",
    # exit 3 (OverflowError) in `check`
    "param_expression_overflows": HEADER
    + "param a: f32 = -1000\ninput x: f32[M, N]\noutput y: f32[M, N]\ny = x * exp(-a)\n",
    "param_expression_undefined": HEADER
    + "param a: f32 = -2.0\ninput x: f32[M, N]\noutput y: f32[M, N]\ny = x + log(a)\n",
    "param_expression_beyond_f32": HEADER
    + "param a: f32 = 1e30\ninput x: f32[M, N]\noutput y: f32[M, N]\ny = x * (a * a)\n",
    "tensor_input_with_value": HEADER + "input x: f32[M] = 1.0\n",
    "weight_of_integers": HEADER + "weight w: i32[M] = ones\n",
    "weight_unknown_init": HEADER + "weight w: f32[M] = twos\n",
    "weight_misspelled_draw": HEADER + "weight w: f32[M] = randm\n",
    "weight_scaled_fill": HEADER + "weight w: f32[M] = ones * 0.5\n",
    "module_unknown": HEADER + "weight fc: lineer(M, N)\n",
    "module_renamed": HEADER + "weight bn: batch_norm(N)\n",
    "weight_ones_times_a_dim": HEADER + "weight w: f32[N] = ones * M\n",
    "module_unknown_argument": HEADER + "weight fc: linear(M, N, bais=false)\n",
    "module_missing_argument": HEADER + "weight fc: linear(M)\n",
    "module_too_many_arguments": HEADER + "weight fc: linear(M, N, true, 1.0)\n",
    "module_argument_given_twice": HEADER + "weight fc: linear(M, N, in_features=M)\n",
    "module_flag_not_bool": HEADER + "weight fc: linear(M, N, bias=1.0)\n",
    "module_size_unknown_dim": HEADER + "weight fc: linear(M, K)\n",
    "module_parameter_taken": HEADER + "input fc_bias: f32[N]\nweight fc: linear(M, N)\n",
    "module_unknown_parameter": HEADER + "input x: f32[M, N]\nweight fc: linear(M, N)\n"
    "output y: f32[N]\ny = fc.bais\n",
    "module_missing_bias": HEADER + "input x: f32[M, N]\nweight fc: linear(M, N, bias=false)\n"
    "output y: f32[N]\ny = fc.bias\n",
    "module_number_from_an_input": HEADER + "input x: f32[M, N]\nweight gn: group_norm(2, N, "
    "eps=x)\noutput y: f32[M, N]\ny = x * gn.weight\n",
    "module_with_running_statistics_applied_twice": HEADER
    + "input x: f32[M, N]\nweight bn: batch_norm1d(N)\n"
    "output y: f32[M, N]\ny = bn(bn(x))\n",
    "instance_norm_of_one_position_in_training": HEADER
    + "input x: f32[M, N, 1]\nweight inorm: instance_norm1d(N, track_running_stats=true)\n"
    "output y: f32[M, N, 1]\ny = inorm(x)\n",
    "dropout_probability_out_of_range": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = dropout(x, 1.5)\n",
    "keyword_assigned": HEADER + "input x: f32[M]\noutput y: f32[M]\nend = x\n",
    "buffer_drawn": HEADER + "buffer m: f32[M, N] = randn\n",
    "buffer_other_triangle": HEADER + "buffer m: f32[M, N] = diag(ones)\n",
    "state_assigned_twice": HEADER + "input x: f32[M, N]\nstate h: f32[M, N] = zeros\n"
    "output y: f32[M, N]\nh = x\nh = x * 2.0\ny = h\n",
    "state_of_another_shape": HEADER + "input x: f32[M]\nstate h: f32[M, N] = zeros\n"
    "output y: f32[M, N]\nh = x\ny = h\n",
    "block_sees_spec_tensor": HEADER + "input x: f32[M, N]\nblock scaled(k: f32)\n"
    "    forward(v)\n    return v * k + x\nend\nweight s: scaled(2.0)\noutput y: f32[M, N]\n"
    "y = s(x)\n",
    "matmul_split_batched_operand": HEADER + "input a: f32[2, M, 2 * N]\ninput b: f32[16, N]\n"
    "output y: f32[2, M, N]\ny = a @ b\n",
    "kernel_name_too_long": "kernel " + "k" * 101 + "\n",
    "module_call_two_operands": HEADER + "input x: f32[M, M]\nweight fc: linear(M, N)\n"
    "output y: f32[M, N]\ny = fc(x, x)\n",
    # statements
    "assign_to_undeclared": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\nz = x\n",
    "assign_to_input": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\nx = x\n",
    "assigned_twice": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = x\ny = x\n",
    "output_shape_mismatch": HEADER + "input x: f32[M, N]\noutput y: f32[N, M]\ny = x\n",
    "output_dtype_mismatch": HEADER + "input x: f16[M, N]\noutput y: f32[M, N]\ny = x\n",
    "scalar_to_output": HEADER + "param a: f32 = 1.0\noutput y: f32[M, N]\ny = a * 2.0\n",
    # expressions
    "unknown_name": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = x + z\n",
    "read_output": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\noutput w: f32[M, N]\n"
    "y = x\nw = y\n",
    "int_list_param_in_expression": HEADER + "param shape: int[2] = [M, N]\n"
    "input x: f32[M, N]\noutput y: f32[M, N]\ny = x * shape\n",
    # did-you-mean for torch's and Python's spellings
    "torch_keyword_dim": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = softmax(x, dim=1)\n",
    "numpy_keyword_keepdims": HEADER + "input x: f32[M, N]\noutput y: f32[M, 1]\n"
    "y = sum(x, axis=1, keepdims=true)\n",
    "torch_keyword_kernel_size": HEADER + "input x: f32[M, N]\noutput y: f32[M, 4]\n"
    "y = window_max(x, axis=1, kernel_size=2)\n",
    "keyword_twice": HEADER + "input x: f32[M, N]\noutput y: f32[M, 1]\n"
    "y = sum(x, axis=1, keepdim=true, keepdim=false)\n",
    "misspelled_keyword_lists_the_keywords": HEADER + "input x: f32[M, N]\noutput y: f32[M]\n"
    "y = sum(x, axsi=1)\n",
    "python_true_as_a_flag": HEADER + "input x: f32[M, N]\noutput y: f32[M, 1]\n"
    "y = sum(x, axis=1, keepdim=True)\n",
    "python_true_as_a_name": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = where(True, x, x)\n",
    "weight_without_a_value": HEADER + "weight b: f32[N]\n",
    "cast_narrowing": HEADER + "input x: f32[M, N]\noutput y: f16[M, N]\ny = cast(x, f16)\n",
    "cast_unknown_dtype": HEADER + "input x: f16[M, N]\noutput y: f32[M, N]\ny = cast(x, f64)\n",
    "cast_without_dtype": HEADER + "input x: f16[M, N]\noutput y: f32[M, N]\ny = cast(x)\n",
    "bool_outside_keyword": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = x * true\n",
    "list_outside_keyword": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = [x]\n",
    "transpose": HEADER + "input x: f32[M, N]\noutput y: f32[N, M]\ny = x.T\n",
    "matmul": HEADER + "input x: f32[M, N]\noutput y: f32[M, M]\ny = x @ x\n",
    "matmul_matrix_by_tensor": HEADER + "input a: f32[M, N]\ninput b: f32[M, N, M]\n"
    "output y: f32[M, M, M]\ny = a @ b\n",
    "comparison_outside_where": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = x > 0\n",
    "axis_out_of_range": HEADER + "input x: f32[M, N]\noutput y: f32[M]\ny = sum(x, axis=2)\n",
    "axis_repeated": HEADER + "input x: f32[M, N]\noutput y: f32[]\ny = sum(x, axis=[1, -1])\n",
    "axis_not_literal": HEADER + "input x: f32[M, N]\noutput y: f32[M]\ny = sum(x, axis=M)\n",
    "keepdim_not_bool": HEADER + "input x: f32[M, N]\noutput y: f32[M, 1]\n"
    "y = sum(x, axis=1, keepdim=1)\n",
    "reduction_unknown_keyword": HEADER + "input x: f32[M, N]\noutput y: f32[M]\n"
    "y = sum(x, dim=1)\n",
    "reduction_of_scalar": HEADER + "param a: f32 = 1.0\noutput y: f32[]\ny = sum(a)\n",
    "prod_two_axes": HEADER + "input x: f32[M, N]\noutput y: f32[]\ny = prod(x, axis=[0, 1])\n",
    "argmax_without_axis": HEADER + "input x: f32[M, N]\noutput y: i64[]\ny = argmax(x)\n",
    "argmax_two_axes": HEADER + "input x: f32[M, N]\noutput y: i64[]\ny = argmax(x, axis=[0, 1])\n",
    "argmax_into_float_output": HEADER + "input x: f32[M, N]\noutput y: f32[M]\n"
    "y = argmin(x, axis=1)\n",
    "float_into_integer_output": HEADER + "input x: f32[M, N]\noutput y: i64[M]\n"
    "y = sum(x, axis=1)\n",
    "bool_output": HEADER + "input x: f32[M, N]\noutput y: bool[M, N]\ny = x\n",
    "integer_input_without_range": HEADER + "input t: i64[M]\noutput y: f32[M]\ny = t * 2.0\n",
    "range_on_a_float_input": HEADER + "input t: f32[M] in range(N)\noutput y: f32[M]\n"
    "y = t * 2.0\n",
    "range_without_count": HEADER + "input t: i64[M] in range\noutput y: f32[M]\ny = t * 2.0\n",
    "bool_input_with_domain": HEADER + "input m: bool[M] in positive\noutput y: f32[M]\n"
    "y = m * 2.0\n",
    "integer_weight": HEADER + "weight w: i32[M] = ones\noutput y: f32[M]\ny = w * 2.0\n",
    "integer_matmul": HEADER + "input a: i32[M, N] in range(M)\ninput b: f32[N, M]\n"
    "output y: f32[M, M]\ny = a @ b\n",
    "index_without_axis": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = x * index(x)\n",
    "where_on_a_float_tensor": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = where(x, x, 0.0)\n",
    "empty_slice": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = x[2:2]\n",
    "too_many_slices": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = x[:, :, 1:]\n",
    "slice_of_a_scalar": HEADER + "param a: f32 = 1.0\noutput y: f32[M]\ny = a[1:]\n",
    "two_ellipses": HEADER + "input x: f32[M, N]\noutput y: f32[M, N - 1]\ny = x[..., 1:, ...]\n",
    "slice_with_a_step_of_another_shape": HEADER
    + "input x: f32[M, N]\noutput y: f32[M, N]\ny = x[::2]\n",
    "slice_with_a_zero_step": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = x[::0]\n",
    "slice_with_a_negative_step": HEADER
    + "input x: f32[M, N]\noutput y: f32[M, N]\ny = x[:, ::-1]\n",
    "stepped_slice_of_positions": HEADER
    + "input x: f32[M, N]\noutput y: i64[2]\ny = argmax(x, axis=1)[::2]\n",
    # reshapes (M = 4, N = 8)
    "reshape_regrouping_axes": HEADER + "input x: f32[M, N]\noutput y: f32[N, M]\n"
    "y = x.reshape(N, M)\n",
    "reshape_to_other_element_count": HEADER + "input x: f32[M, N]\noutput y: f32[M, 3]\n"
    "y = x.reshape(M, 3, -1)\n",
    "reshape_two_inferred_sizes": HEADER + "input x: f32[M, N]\noutput y: f32[M, 2, 4]\n"
    "y = x.view(M, -1, -1)\n",
    "reshape_size_not_whole": HEADER + "input x: f32[M, N]\noutput y: f32[M, 8]\n"
    "y = x.reshape(M, N / 3, 3)\n",
    "reshape_size_not_an_integer": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = x.reshape(M, 8.0)\n",
    "reshape_without_shape": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = x.view()\n",
    "reshape_split_two_ways": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "let a = x.reshape(M, 2, 4)\nlet b = x.reshape(M, 4, 2)\n"
    "y = a.reshape(M, N) + b.reshape(M, N)\n",
    "scan_along_a_split_axis": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = x.reshape(M, 2, 4).reshape(M, N) + cumsum(x, axis=1)\n",
    "module_called_as_a_method": HEADER + "input x: f32[M, N]\nweight fc: linear(N, N)\n"
    "output y: f32[M, N]\ny = x.fc()\n",
    # computed matmul operands (M = 4, N = 8)
    # splits, transposes and masks (attention)
    "split_into_fewer_names": HEADER + "input x: f32[M, N]\noutput y: f32[M, 4]\n"
    "let a, b = x.split(2, axis=1)\ny = a\n",
    "split_of_an_axis_declared_as_a_product": HEADER + "input x: f32[M, N]\n"
    "weight w: f32[4 * N, N] = randn\noutput y: f32[M, N]\n"
    "let i, f, g, o = (x @ w.T).split(N, axis=1)\ny = i * f + g * o\n",
    "split_outside_a_let": HEADER + "input x: f32[M, N]\noutput y: f32[M, 4]\n"
    "y = x.split(4, axis=1)\n",
    "several_names_without_a_split": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "let a, b = x\ny = a\n",
    "permute_repeats_an_axis": HEADER + "input x: f32[M, N, 2]\noutput y: f32[N, M, 2]\n"
    "y = x.permute(1, 1, 2)\n",
    "transpose_of_one_axis": HEADER + "input x: f32[M, N]\noutput y: f32[N, M]\n"
    "y = x.transpose(1)\n",
    "masked_fill_without_a_value": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = x.masked_fill(x > 0.0)\n",
    # nn.MultiheadAttention: three operands, two results
    "module_of_two_results_bound_to_one_name": ATTENTION + "let a = attn(x, x, x)\ny = a\n",
    "module_of_two_results_bound_to_three_names": ATTENTION
    + "let a, b, c = attn(x, x, x)\ny = a\n",
    "function_of_one_result_bound_to_two_names": ATTENTION + "let a, b = relu(x)\ny = a\n",
    "attention_called_with_one_operand": ATTENTION + "let a, _ = attn(x)\ny = a\n",
    "attention_heads_do_not_divide": HEADER + "input x: f32[M, 2, N]\n"
    "weight attn: multihead_attention(N, 3)\noutput y: f32[M, 2, N]\n"
    "let a, _ = attn(x, x, x)\ny = a\n",
    "attention_dropout": HEADER + "input x: f32[M, 2, N]\n"
    "weight attn: multihead_attention(N, 2, dropout=0.1)\noutput y: f32[M, 2, N]\n"
    "let a, _ = attn(x, x, x)\ny = a\n",
    # time loops
    "loop_over_something_else_than_range": LOOP.replace("range(T)", "steps(T)"),
    "loop_assigns_a_name_it_does_not_carry": LOOP.replace("    h = tanh", "    g = tanh"),
    "loop_step_outside_an_index": LOOP.replace("x[t] + h", "x[t] + h * t"),
    "loop_reads_a_step_of_a_weight": LOOP.replace(
        "let h = h0", "weight w: f32[T, B, H] = randn\nlet h = h0"
    ).replace("x[t] + h", "w[t] + h"),
    "loop_writes_an_output_of_other_steps": LOOP.replace("f32[T, B, H]\nlet", "f32[B, H]\nlet"),
    "loop_computes_after_it": LOOP + "let z = h * 2.0\n",
    "loop_after_computing": LOOP.replace("let h = h0", "let h = h0 * 2.0"),
    "loop_with_a_dropout": LOOP.replace("tanh(x[t] + h)", "dropout(tanh(x[t] + h), 0.5)"),
    "index_out_of_range": HEADER + "input x: f32[M, N]\noutput y: f32[N]\ny = x[4]\n",
    "loop_writes_a_step_twice": LOOP.replace("end\n", "    y[t] = h\nend\n"),
    # convolutions
    "conv_groups_do_not_divide": CONV + "weight w: f32[6, 2, 3, 3] = randn\n"
    "output y: f32[2, 6, 6, 6]\ny = conv(x, w, groups=3)\n",
    "conv_weight_of_another_layout": CONV + "weight w: f32[6, 3, 3, 3] = randn\n"
    "output y: f32[2, 6, 6, 6]\ny = conv(x, w, groups=2)\n",
    "conv_weight_of_another_rank": CONV + "weight w: f32[6, 4, 3] = randn\n"
    "output y: f32[2, 6, 6, 6]\ny = conv(x, w)\n",
    "conv_of_a_vector": CONV + "weight w: f32[6, 4, 3, 3] = randn\n"
    "output y: f32[2, 6, 6, 6]\ny = conv(sum(x, axis=[2, 3]), w)\n",
    "conv_kernel_longer_than_its_axis": CONV + "weight w: f32[6, 4, 3, 9] = randn\n"
    "output y: f32[2, 6, 6, 6]\ny = conv(x, w, dilation=[1, 2])\n",
    "conv_list_of_the_wrong_length": CONV + "weight w: f32[6, 4, 3, 3] = randn\n"
    "output y: f32[2, 6, 6, 6]\ny = conv(x, w, stride=[1, 1, 1])\n",
    "conv_unknown_keyword": CONV + "weight w: f32[6, 4, 3, 3] = randn\n"
    "output y: f32[2, 6, 6, 6]\ny = conv(x, w, output_padding=1)\n",
    "conv_one_argument": CONV + "output y: f32[2, 4, 8, 8]\ny = conv(x)\n",
    "conv_transpose_output_padding_too_large": CONV + "weight w: f32[4, 6, 3, 3] = randn\n"
    "output y: f32[2, 6, 10, 10]\ny = conv_transpose(x, w, output_padding=1)\n",
    "conv_strided_along_every_axis_of_3d": "kernel k\ninput x: f32[2, 4, 9, 9, 9]\n"
    "weight w: f32[6, 4, 3, 3, 3] = randn\noutput y: f32[2, 6, 4, 4, 4]\n"
    "y = conv(x, w, stride=2)\n",
    "conv_module_groups_do_not_divide": CONV + "weight c: conv2d(4, 6, 3, groups=4)\n"
    "output y: f32[2, 6, 6, 6]\ny = c(x)\n",
    "conv_module_kernel_of_the_wrong_length": CONV + "weight c: conv2d(4, 6, [3, 3, 3])\n"
    "output y: f32[2, 6, 6, 6]\ny = c(x)\n",
    "conv_transpose_module_output_padding": CONV + "weight c: conv_transpose2d(4, 6, 3, "
    "output_padding=2, stride=2)\noutput y: f32[2, 6, 17, 17]\ny = c(x)\n",
    "cat_without_axis": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = cat([x, x])\n",
    "cat_of_one": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = cat([x], axis=0)\n",
    "cat_mismatched": HEADER + "input x: f32[M, N]\ninput z: f32[M, M]\n"
    "output y: f32[M, N + 4]\ny = cat([x, z], axis=0)\n",
    "flip_without_axis": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = flip(x)\n",
    "function_misspelled": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = fliip(x, axis=1)\n",
    "name_misspelled": HEADER + "input logits: f32[M, N]\noutput y: f32[M, N]\ny = logit * 2.0\n",
    "flip_of_a_scalar": HEADER + "param a: f32 = 1.0\noutput y: f32[M]\ny = flip(a, axis=0)\n",
    "dim_offset_below_one": HEADER + "input x: f32[M, N]\noutput y: f32[M - 4, N]\ny = x\n",
    "bool_param_without_value": HEADER + "param flag: bool\ninput x: f32[M, N]\n"
    "output y: f32[M, N]\ny = x\n",
    "window_without_axis": HEADER + "input x: f32[M, N]\noutput y: f32[M, 4]\n"
    "y = window_max(x, size=2)\n",
    "window_without_size": HEADER + "input x: f32[M, N]\noutput y: f32[M, 4]\n"
    "y = window_max(x, axis=1)\n",
    "window_size_zero": HEADER + "input x: f32[M, N]\noutput y: f32[M, 4]\n"
    "y = window_sum(x, axis=1, size=0)\n",
    "window_size_not_integer": HEADER + "input x: f32[M, N]\noutput y: f32[M, 4]\n"
    "y = window_sum(x, axis=1, size=2.5)\n",
    "window_values_per_axis_mismatch": HEADER + "input x: f32[M, N]\noutput y: f32[2, 4]\n"
    "y = window_max(x, axis=[0, 1], size=[2, 2, 2])\n",
    "window_padding_above_half": HEADER + "input x: f32[M, N]\noutput y: f32[M, 8]\n"
    "y = window_max(x, axis=1, size=2, stride=1, padding=2)\n",
    "window_mean_ceil_mode": HEADER + "input x: f32[M, N]\noutput y: f32[M, 3]\n"
    "y = window_mean(x, axis=1, size=3, ceil_mode=true)\n",
    "window_longer_than_axis": HEADER + "input x: f32[M, N]\noutput y: f32[M, 1]\n"
    "y = window_min(x, axis=1, size=9)\n",
    "window_wrong_output_shape": HEADER + "input x: f32[M, N]\noutput y: f32[M, 3]\n"
    "y = window_max(x, axis=1, size=2)\n",
    "window_unknown_keyword": HEADER + "input x: f32[M, N]\noutput y: f32[M, 4]\n"
    "y = window_max(x, axis=1, size=2, kernel_size=2)\n",
    "softmax_without_axis": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = softmax(x)\n",
    "softmax_two_axes": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = softmax(x, axis=[0, 1])\n",
    "cumsum_without_axis": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = cumsum(x)\n",
    "cumsum_two_axes": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = cumsum(x, axis=[0, 1])\n",
    "cumsum_flag_not_bool": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = cumsum(x, axis=1, reverse=1)\n",
    "cumsum_keepdim": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = cumsum(x, axis=1, keepdim=true)\n",
    "cumsum_of_scalar": HEADER + "param a: f32 = 1.0\noutput y: f32[]\ny = cumsum(a, axis=0)\n",
    "triu_of_vector": HEADER + "input x: f32[M]\noutput y: f32[M]\ny = triu(x)\n",
    "triu_diagonal_not_integer": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = triu(x, diagonal=0.5)\n",
    "tril_unknown_keyword": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = tril(x, k=1)\n",
    "reduced_shape_mismatch": HEADER + "input x: f32[M, N]\noutput y: f32[M, 1]\n"
    "y = sum(x, axis=1)\n",
    "unknown_function": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = gelu(x)\n",
    "wrong_argument_count": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = exp(x, x)\n",
    "unexpected_keyword": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = exp(x, k=1)\n",
    "tensor_exponent": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = x ** x\n",
    "clamp_without_bounds": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\ny = clamp(x)\n",
    "clamp_tensor_bound": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = clamp(x, x, 1.0)\n",
    "where_without_comparison": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = where(x, x, 0.0)\n",
    "mixed_dtypes": HEADER + "input x: f32[M, N]\ninput h: f16[M, N]\noutput y: f32[M, N]\n"
    "y = x + h\n",
    "shapes_do_not_broadcast": HEADER + "input x: f32[M, N]\ninput v: f32[M]\n"
    "output y: f32[M, N]\ny = x + v\n",
    # found by tests/test_fuzz.py
    "dim_above_int32": "kernel k\ndims N = 99999999999999999999\n",
    "tensor_above_int32": HEADER + "dims K = 65536\ninput x: f32[K, K]\n",
    "nested_too_deeply": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = " + "exp(" * 60 + "x" + ")" * 60 + "\n",
    "scalar_where_condition": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = where(1.0 > 2.0, x, x)\n",
    "unbiased_var_of_one_element": HEADER + "input x: f32[M, 1]\noutput y: f32[M]\n"
    "y = var(x, axis=1)\n",
    "keyword_as_kernel_name": "kernel class\n",
    "carriage_return_in_comment": "# a\rb\nkernel k\ny = (",
    # passes
    "constant_without_value": HEADER + "input x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = x + log(-1.0)\n",
    "kernel_too_large_to_loop": "kernel k\ndims M = 2, N = 34000000\ninput x: f32[M, N]\n"
    "output y: f32[M, N]\ny = cumsum(x, axis=1)\n",
}

LOCATION = re.compile(r"^case\.pto:(\d+):(\d+): error: .+\n +--> case\.pto:\1:\2\n")


@pytest.mark.parametrize("case", sorted(CASES))
def test_diagnostic(case, pto_golden_text):
    with pytest.raises(ptodsl.SpecError) as raised:
        ptodsl.compile(CASES[case], name="case.pto")
    rendered = raised.value.render()
    assert LOCATION.match(rendered), rendered
    assert "^" in rendered.splitlines()[4]
    assert str(raised.value) == rendered
    pto_golden_text(f"diagnostics/{case}.txt", rendered + "\n")


def test_a_long_flat_sum_compiles_and_a_huge_one_is_located():
    """A left-to-right chain is a tree as deep as it is long: 331 terms once ended in
    "nested too deeply" at 1:1. Up to MAX_TERMS nodes compile; beyond, the statement is
    the error's location."""
    head = "kernel k\ndims N = 4\ninput x: f32[N]\noutput y: f32[N]\ny = "
    ptodsl.compile(head + " + ".join(["x"] * 331) + "\n", "flat.pto", tuning=None)
    with pytest.raises(ptodsl.SpecError) as raised:
        ptodsl.compile(head + " + ".join(["x"] * 600) + "\n", "flat.pto", tuning=None)
    assert str(raised.value).startswith(
        "flat.pto:5:5: error: this expression has 1199 terms and operators, more than 1000"
    )


TORCH_FUNCTIONS = {
    "gelu": torch.nn.functional.gelu,
    "silu": torch.nn.functional.silu,
    "softplus": torch.nn.functional.softplus,
    "elu": lambda x: torch.nn.functional.elu(x, alpha=0.7),
    "hardtanh": torch.nn.functional.hardtanh,
    "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.3),
    "hardsigmoid": torch.nn.functional.hardsigmoid,
    "softsign": torch.nn.functional.softsign,
    "mish": torch.nn.functional.mish,
    "hardswish": torch.nn.functional.hardswish,
    "relu6": torch.nn.functional.relu6,
    "logsigmoid": torch.nn.functional.logsigmoid,
    "selu": torch.nn.functional.selu,
}


@pytest.mark.parametrize("name", sorted(SPELLED_OUT))
def test_a_functions_written_out_form_is_torchs(name):
    """The note for a torch function without a builtin gives a form that compiles and
    computes torch's function (its reference, on both signs and large magnitudes)."""
    with pytest.raises(ptodsl.SpecError, match=f"no builtin `{name}`") as raised:
        ptodsl.compile(f"kernel f\ndims N = 64\ninput x: f32[N]\noutput y: f32[N]\ny = {name}(x)\n")
    assert SPELLED_OUT[name] in str(raised.value)
    spec = (
        "kernel f\ndims N = 64\nparam alpha: f32 = 0.7\nparam negative_slope: f32 = 0.3\n"
        f"input x: f32[N]\noutput y: f32[N]\ny = {SPELLED_OUT[name]}\n"
    )
    model = ptodsl.compile(spec).reference.Model()
    x = torch.cat([torch.linspace(-30, 30, 61), torch.tensor([-1e-3, 0.0, 1e-3])]).double()
    # rtol: torch's softplus returns x itself above x = 20, the exact form x + 2e-9 there
    torch.testing.assert_close(model(x), TORCH_FUNCTIONS[name](x), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(MODE_DEPENDENT))
def test_a_mode_dependent_function_says_what_to_write(name):
    with pytest.raises(ptodsl.SpecError, match="depends on train or eval mode") as raised:
        ptodsl.compile(f"kernel f\ndims N = 64\ninput x: f32[N]\noutput y: f32[N]\ny = {name}(x)\n")
    assert MODE_DEPENDENT[name] in str(raised.value)


@pytest.mark.parametrize("name", sorted({*SPELLED_OUT, *MODE_DEPENDENT, *WRITTEN_OTHERWISE}))
def test_a_torch_function_without_a_builtin_points_to_its_cookbook_entry(name):
    """What to write instead, then the cookbook section that shows it (tests/test_docs.py
    checks that each section exists)."""
    spec = f"kernel f\ndims N = 64\ninput x: f32[N]\noutput y: f32[N]\ny = {name}(x)\n"
    with pytest.raises(ptodsl.SpecError, match=f"no builtin `{name}`") as raised:
        ptodsl.compile(spec)
    note = cookbook_note(name)
    assert note and note in str(raised.value)
    if name in WRITTEN_OTHERWISE:
        assert WRITTEN_OTHERWISE[name] in str(raised.value)
