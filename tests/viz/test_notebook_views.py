"""Jupyter views: an Array as HTML, a lowered jit function's kernels with highlighted source, and a drawn
lazy graph with the nodes that get a buffer highlighted (tgfn/viz/notebook.py, graph.py)."""
import numpy as np

import tgfn
import tgfn.numpy as tnp
import tgfn.viz


def test_array_renders_shape_dtype_device_and_values():
  page = tnp.array(np.arange(6, dtype=np.int32).reshape(2, 3))._repr_html_()
  assert "(2, 3)" in page and "int32" in page and "CPU" in page and "[3 4 5]" in page


def test_lowered_function_renders_each_kernel_with_highlighted_source():
  x = tnp.ones((4, 6))
  page = tgfn.jit(lambda v: v / v.sum(1, keepdims=True)).lower(x)._repr_html_()
  assert "2 kernel(s)" in page and "reduce 4x1 over 6 float32" in page
  assert '<span style="color:#d73a49">void</span>' in page and "TG_PRELUDE" not in page


def test_draw_marks_the_nodes_that_get_a_buffer():
  x = tnp.ones((3, 5))
  svg = tgfn.viz.draw(x - x.max(1, keepdims=True))._repr_html_()
  marked = svg.count('class="node changed"')
  assert '<svg class="graph"' in svg and marked == 2  # the broadcast max and the output
